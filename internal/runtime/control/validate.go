package control

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
)

// Bounds of a placement's fields. The policy's own bounds (SchedulerPolicy:
// maxPauseDuration ≤ 24h, bufferTokensPerProgram ≤ 1Mi) are the largest a
// correct controller sends; anything beyond is refused rather than wrapped
// into a negative duration.
// The highest version a pod applies is wire.MaxPlacementVersion.
//
// MaxPlacementPrograms bounds the program ids one placement names in its
// lists (place, pause, mark, unmark, release, unroute, fetch, together) and
// MaxPlacementRoutes its routes. A placement names the programs of one pod,
// and routes every program of the pool: a pod holds tens to hundreds of
// programs (each a context of thousands of tokens in its KV cache), so
// these are hundreds of times what a real pool sends, yet they keep a
// placement's work and the memory it can make a pod keep bounded. The
// program table bounds what placements add to it (programs.MaxPlacedEntries,
// programs.MaxRoutes).
const (
	MaxPauseSecondsLimit = int64(programs.MaxPauseLimit / time.Second)
	MaxBufferTokens      = 1 << 20
	MaxPlacementPrograms = 1 << 16
	MaxPlacementRoutes   = programs.MaxRoutes
)

// FieldError names the placement field that was refused and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidatePlacement checks every field of a placement; the first bad one is
// returned and the whole placement must be refused (applying part of it
// would leave the pod's view of the fleet half old, half new).
func ValidatePlacement(p *wire.Placement) error {
	if p.Version <= 0 || p.Version > wire.MaxPlacementVersion {
		return fieldErr("version", "must be in [1, %d], got %d", wire.MaxPlacementVersion, p.Version)
	}
	lists := []struct {
		name string
		ids  []string
	}{
		{"place", p.Place}, {"pause", p.Pause}, {"mark", p.Mark}, {"unmark", p.Unmark},
		{"release", p.Release}, {"unroute", p.Unroute},
	}
	// Too many: the error names the longest list, the one to look at.
	named, field, longest := len(p.Fetch), "fetch", len(p.Fetch)
	for _, l := range lists {
		named += len(l.ids)
		if len(l.ids) > longest {
			field, longest = l.name, len(l.ids)
		}
	}
	if named > MaxPlacementPrograms {
		return fieldErr(field, "a placement names at most %d programs in place, pause, mark, unmark, release, unroute and fetch together, got %d", MaxPlacementPrograms, named)
	}
	if len(p.Routes) > MaxPlacementRoutes {
		return fieldErr("routes", "at most %d routes, got %d", MaxPlacementRoutes, len(p.Routes))
	}
	for _, l := range lists {
		for i, id := range l.ids {
			if err := programs.CheckScopedID(id); err != nil {
				return fieldErr(fmt.Sprintf("%s[%d]", l.name, i), "%s", err)
			}
		}
	}
	for id, addr := range p.Routes {
		if err := programs.CheckScopedID(id); err != nil {
			return fieldErr("routes", "program id %q: %s", id, err)
		}
		if addr == "" {
			continue // paused: held wherever its requests arrive
		}
		if err := checkAddr(addr); err != nil {
			return fieldErr(fmt.Sprintf("routes[%q]", id), "%s", err)
		}
	}
	for id, addr := range p.Fetch {
		if err := programs.CheckScopedID(id); err != nil {
			return fieldErr("fetch", "program id %q: %s", id, err)
		}
		if !slices.Contains(p.Place, id) {
			return fieldErr(fmt.Sprintf("fetch[%q]", id), "the program is not in place")
		}
		if err := checkAddr(addr); err != nil {
			return fieldErr(fmt.Sprintf("fetch[%q]", id), "%s", err)
		}
	}
	for addr := range p.Room {
		if err := checkAddr(addr); err != nil {
			return fieldErr("room", "%s", err)
		}
	}
	switch placement.Mode(p.Mode) {
	case "", placement.ModeDefault, placement.ModeProgramAware:
	default:
		return fieldErr("mode", "must be %q or %q (or absent: keep the current mode), got %q", placement.ModeDefault, placement.ModeProgramAware, p.Mode)
	}
	if p.MaxPauseSeconds < 0 || p.MaxPauseSeconds > MaxPauseSecondsLimit {
		return fieldErr("maxPauseSeconds", "must be between 0 (keep the current value) and %d, got %d", MaxPauseSecondsLimit, p.MaxPauseSeconds)
	}
	if p.BufferTokensPerProgram < 0 || p.BufferTokensPerProgram > MaxBufferTokens {
		return fieldErr("bufferTokensPerProgram", "must be between 0 (keep the current value) and %d, got %d", MaxBufferTokens, p.BufferTokensPerProgram)
	}
	if c := p.Capacity; c != nil {
		if math.IsNaN(c.ActingTokenWeight) || c.ActingTokenWeight < 0 || c.ActingTokenWeight > 1 {
			return fieldErr("capacity.actingTokenWeight", "must be in [0, 1], got %v", c.ActingTokenWeight)
		}
		if math.IsNaN(c.DeviceOvercommit) || c.DeviceOvercommit < 1 || c.DeviceOvercommit > placement.MaxDeviceOvercommit {
			return fieldErr("capacity.deviceOvercommit", "must be in [1, %d], got %v", placement.MaxDeviceOvercommit, c.DeviceOvercommit)
		}
	}
	return nil
}

// checkAddr accepts what the server can forward to: host:port with a
// non-empty host and a port in 1–65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	for _, r := range host {
		if r <= 0x20 || r == 0x7f || r == '/' || r == '@' || r == '?' || r == '#' {
			return fmt.Errorf("address %q: host contains %q", addr, r)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q: port must be a number in 1-65535", addr)
	}
	return nil
}

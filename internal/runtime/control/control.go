// Package control is the runtime pod's control API, served on its own port
// for the controller: GET /v1/state returns the pod's KV capacity and
// program table; PUT /v1/placement applies a versioned placement. Both need
// the pool's bearer token (from the Secret the controller creates per pool).
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// Paths of the control API.
const (
	StatePath     = "/v1/state"
	PlacementPath = "/v1/placement"
	maxBody       = 8 << 20
)

// Handler serves the control API over a program table, every endpoint
// behind Authorize(token).
func Handler(t *programs.Table, token string) http.Handler {
	return Authorize(token, Routes(t))
}

// Routes are the control API's endpoints over a program table, without
// authentication: a caller that adds endpoints to the control port adds
// them here and serves the whole behind Authorize (Handler does both).
func Routes(t *programs.Table) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, t.Report())
	})
	mux.HandleFunc("PUT "+PlacementPath, func(w http.ResponseWriter, r *http.Request) {
		var p wire.Placement
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		err := dec.Decode(&p)
		if err == nil {
			// One JSON object and nothing after it: trailing bytes mean a
			// sender out of step with this API, not a placement to trust.
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("unexpected data after the JSON object")
			}
		}
		if err != nil {
			status := http.StatusBadRequest
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			writeJSON(w, status, map[string]string{"error": "placement: " + err.Error()})
			return
		}
		res, err := Apply(t, &p)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "placement refused: " + err.Error(), "field": refusedField(err)})
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	return mux
}

// Apply applies placement p to the pod's program table t, as PUT
// /v1/placement does (the in-process client of the simulator of agent
// pools calls it too): ValidatePlacement, then Table.ApplyPlacement. A
// refused placement changes nothing; its error is a *FieldError or a
// *programs.LimitError, naming the field.
func Apply(t *programs.Table, p *wire.Placement) (*wire.PlacementResult, error) {
	if err := ValidatePlacement(p); err != nil {
		return nil, err
	}
	applied, err := t.ApplyPlacement(p)
	if err != nil {
		return nil, err
	}
	return &wire.PlacementResult{Version: t.Version(), Applied: applied}, nil
}

// refusedField is the placement field an Apply error names, "" if none.
func refusedField(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	var le *programs.LimitError
	if errors.As(err, &le) {
		return le.Field
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// StatusError is a control API call a pod answered with a status other
// than 200.
type StatusError struct {
	Method, URL string
	Code        int
	Status      string
	Message     string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("control %s %s: %s: %s", e.Method, e.URL, e.Status, e.Message)
}

// IsUnauthorized reports whether err, or any error it wraps or joins, is a
// pod refusing the caller's token (401 or 403): the token is stale, unlike
// a pod that is down or slow, for which reading it again would not help.
func IsUnauthorized(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *StatusError:
		return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if IsUnauthorized(inner) {
				return true
			}
		}
		return false
	}
	return IsUnauthorized(errors.Unwrap(err))
}

// Client talks to pods' control APIs. It never follows a redirect: the
// bearer token is the pool's, and Go's client would send it on to wherever
// a pod (or a peer serving KV) redirects on the same host. A pod's control
// API never redirects, so a redirect is an error (StatusError with the 3xx).
type Client struct {
	HTTP  *http.Client
	Token string
}

// NewClient returns a client with a bounded per-call timeout.
func NewClient(token string, timeout time.Duration) *Client {
	return &Client{HTTP: &http.Client{Timeout: timeout, CheckRedirect: refuseRedirect}, Token: token}
}

func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// send adds the token to req and sends it without following redirects,
// whatever c.HTTP's CheckRedirect says.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	var hc http.Client // a copy shares the transport and its connections
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = refuseRedirect
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return hc.Do(req)
}

// State reads a pod's report; addr is host:port of its control API.
func (c *Client) State(ctx context.Context, addr string) (*wire.Report, error) {
	var rep wire.Report
	if err := c.do(ctx, http.MethodGet, addr, StatePath, nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Push sends a placement.
func (c *Client) Push(ctx context.Context, addr string, p *wire.Placement) (*wire.PlacementResult, error) {
	var res wire.PlacementResult
	if err := c.do(ctx, http.MethodPut, addr, PlacementPath, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (c *Client) do(ctx context.Context, method, addr, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(req)
	if err != nil {
		return fmt.Errorf("control %s %s: %w", method, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &StatusError{Method: method, URL: addr + path, Code: resp.StatusCode, Status: resp.Status,
			Message: strings.TrimSpace(string(msg))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("control %s %s%s: decode: %w", method, addr, path, err)
	}
	return nil
}

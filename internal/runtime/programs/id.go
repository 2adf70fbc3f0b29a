package programs

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxIDLen bounds a program id in bytes.
const MaxIDLen = 256

// CheckID says why id cannot name a program, or returns nil. The server
// refuses such ids from clients and the control API from the controller,
// so an id that reaches the table is always one both accept.
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty program id")
	case len(id) > MaxIDLen:
		return fmt.Errorf("program id of %d bytes; at most %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("program id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("program id %q contains a control character", id)
		}
	}
	return nil
}

// MaxPauseLimit is the longest pause limit a placement may set: the
// SchedulerPolicy's own bound on maxPauseDuration. Larger values are
// refused by the control API and capped by Apply, so a pause limit never
// overflows into a negative duration.
const MaxPauseLimit = 24 * time.Hour

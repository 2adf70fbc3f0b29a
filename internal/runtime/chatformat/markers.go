package chatformat

import "bytes"

// partialSuffix is the length of the longest end of b that is a proper
// prefix of one of markers: text that may be the start of a marker the
// next piece completes, held back until it does.
func partialSuffix(b []byte, markers ...string) int {
	best := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(b)); k > best; k-- {
			if bytes.HasSuffix(b, []byte(m[:k])) {
				best = k
				break
			}
		}
	}
	return best
}

// firstMarker finds the earliest of markers in b: its offset and which
// one, or -1.
func firstMarker(b []byte, markers ...string) (at int, which string) {
	at = -1
	for _, m := range markers {
		if i := bytes.Index(b, []byte(m)); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// textEvent is an EventText of a copy of b, or nothing for empty b.
func textEvent(evs []Event, kind EventKind, b []byte) []Event {
	if len(b) == 0 {
		return evs
	}
	return append(evs, Event{Kind: kind, Text: append([]byte(nil), b...)})
}

// trimmer trims the blanks at the start and end of a text that arrives in
// pieces: leading blanks are dropped, trailing ones held until more text
// follows them.
type trimmer struct {
	started bool
	blanks  []byte
}

// feed returns the part of b that can be released.
func (t *trimmer) feed(b []byte) []byte {
	if !t.started {
		b = bytes.TrimLeft(b, " \t\r\n")
		if len(b) == 0 {
			return nil
		}
		t.started = true
	}
	end := len(b)
	for end > 0 && isBlank(b[end-1]) {
		end--
	}
	if end == 0 {
		t.blanks = append(t.blanks, b...)
		return nil
	}
	out := append(t.blanks[:len(t.blanks):len(t.blanks)], b[:end]...)
	t.blanks = append([]byte(nil), b[end:]...)
	return out
}

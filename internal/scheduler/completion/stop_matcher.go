package completion

// stopMatcher finds stop strings in text that arrives a few bytes at a time.
//
// It runs one Knuth–Morris–Pratt automaton per stop string. The automaton's
// state is the length of the longest suffix of the text seen so far that is a
// prefix of the stop string, so a match that spans tokens is found without
// looking at earlier bytes again, each new byte costs amortised O(1) per stop
// string, and the largest state is exactly how much of the tail must be held
// back because it could still become a stop string.
type stopMatcher struct {
	stops []string
	// fail holds the KMP failure tables of all stop strings back to back:
	// stop i's table is fail[off[i]:][:len(stops[i])], and its entry j is the
	// length of the longest proper border of stops[i][:j+1].
	fail []int32
	off  []int32
	// state[i] is the length of the longest suffix of the text fed so far
	// that is a proper prefix of stops[i].
	state []int32
}

// reset prepares the matcher for a new request. Empty stop strings are
// ignored: they would match before any text and end every request at once.
// The backing arrays are reused, so a steady stream of requests does not
// allocate once they have grown to the largest stop-string set seen.
func (m *stopMatcher) reset(stops []string) {
	clear(m.stops) // drop references to the previous request's strings
	m.stops = m.stops[:0]
	m.fail = m.fail[:0]
	m.off = m.off[:0]
	m.state = m.state[:0]
	for _, s := range stops {
		if s == "" {
			continue
		}
		base := len(m.fail)
		m.stops = append(m.stops, s)
		m.off = append(m.off, int32(base))
		m.state = append(m.state, 0)
		m.fail = append(m.fail, 0)
		k := int32(0)
		for i := 1; i < len(s); i++ {
			for k > 0 && s[i] != s[k] {
				k = m.fail[base+int(k)-1]
			}
			if s[i] == s[k] {
				k++
			}
			m.fail = append(m.fail, k)
		}
	}
}

// feed advances every automaton over b, the bytes that follow the text fed
// so far.
//
// When honour is set it reports, among the stop-string occurrences that end
// inside b, the one that starts first (ties: the longest stop string): its
// index in stops and its start relative to b[0], negative when the
// occurrence began in earlier bytes (never earlier than held() bytes before
// b). Occurrences that ended before b were reported by earlier calls, or
// were not to be honoured. When honour is not set, matches are stepped over
// and the automata go on as if the stop strings were not complete.
//
// After a reported match the matcher's state is no longer meaningful: the
// caller finishes the request and resets before the next one.
func (m *stopMatcher) feed(b []byte, honour bool) (idx, start int, ok bool) {
	idx = -1
	for i, s := range m.stops {
		fail := m.fail[m.off[i]:][:len(s)]
		st := int(m.state[i])
		for j, c := range b {
			for st > 0 && s[st] != c {
				st = int(fail[st-1])
			}
			if s[st] == c {
				st++
			}
			if st < len(s) {
				continue
			}
			if honour {
				// The first occurrence of s that ends in b is the one that
				// starts first, so there is no need to look further.
				at := j + 1 - len(s)
				if idx < 0 || at < start || (at == start && len(s) > len(m.stops[idx])) {
					idx, start = i, at
				}
				st = int(fail[st-1])
				break
			}
			st = int(fail[st-1])
		}
		m.state[i] = int32(st)
	}
	return idx, start, idx >= 0
}

// held is the length of the longest suffix of the text fed so far that is a
// proper prefix of a stop string: text that may not be released yet.
func (m *stopMatcher) held() int {
	h := int32(0)
	for _, st := range m.state {
		h = max(h, st)
	}
	return int(h)
}

package chatformat

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Pythonic tool calls are a Python list of calls with keyword arguments
// whose values are Python literals:
//
//	[get_weather(location='Paris'), search(query="x", max_results=5)]
//
// Two formats write them. pythonic is the bare list as the whole message
// (vLLM's pythonic parser: Llama 3.2 / Llama 4 pythonic templates,
// ToolACE), optionally wrapped in Llama 4's <|python_start|> …
// <|python_end|>; lfm2 is the list between <|tool_call_start|> and
// <|tool_call_end|>, anywhere after the answer's text (Liquid's LFM2 and
// LFM2.5, llama.cpp's common/parsers/lfm2.cpp). Both parse either form;
// they differ in detection and in the shape a forced call is written in.
var (
	pythonic = &Format{
		Name: "pythonic",
		detect: func(src string) bool {
			// The instruction vLLM's pythonic templates give the model.
			return strings.Contains(src, "[func_name1(")
		},
		calls:             func(*Options) Parser { return &pythonicCalls{} },
		callOpen:          pythonicOpens,
		KeepSpecialTokens: true,
		CallIDLen:         24,
		Forced:            &Forced{Pythonic: &PythonicShape{}},
	}
	lfm2 = &Format{
		Name: "lfm2",
		detect: func(src string) bool {
			// LFM2 marks its tool list with special tokens, LFM2.5 writes
			// it plain (llama.cpp's is_lfm2_template and its LFM2.5 check).
			return (strings.Contains(src, "<|tool_list_start|>") && strings.Contains(src, "<|tool_list_end|>")) ||
				strings.Contains(src, "List of tools: [")
		},
		calls:             func(*Options) Parser { return &pythonicCalls{} },
		callOpen:          pythonicOpens,
		KeepSpecialTokens: true,
		CallIDLen:         24,
		Forced: &Forced{Pythonic: &PythonicShape{Begin: "<|tool_call_start|>", End: "<|tool_call_end|>"},
			SpecialTokens: []string{"<|tool_call_start|>", "<|tool_call_end|>"}},
	}
)

// PythonicShape is a forced call written as Begin + [name(key=value, …),
// …] + End, each value JSON (which the parser reads as the Python literal
// it also is).
type PythonicShape struct {
	Begin, End string
}

// The markers around a pythonic call list, open and close in pairs.
var (
	pythonicOpens  = []string{"<|tool_call_start|>", "<|python_start|>"}
	pythonicCloses = []string{"<|tool_call_end|>", "<|python_end|>"}
)

// maxPythonicList bounds the bytes of one call list held before it is
// read: a list that long that has not ended is returned as text.
const maxPythonicList = 1 << 20

// pythonicCalls reads pythonic calls. A list starts at a marker anywhere,
// or as the output's first non-blank character "[" followed by a name
// and "(" (anything else there is text, a markdown link say). The list is
// held until its closing bracket and then read whole: a Python literal
// cannot be converted to JSON before it ends, and a list that does not
// read as calls is returned as text, the markers with it, which cannot be
// known before its end. Text after the list (after its closing marker) is
// content again.
type pythonicCalls struct {
	state   int // 0 start of output, 1 text, 2 bare list head, 3 list, 4 after a marked list
	buf     []byte
	marker  string // the open marker of the list being read, "" for bare
	scanner pyScanner
	calls   int
}

func (p *pythonicCalls) Feed(text []byte) []Event {
	p.buf = append(p.buf, text...)
	return p.run(nil, false)
}

func (p *pythonicCalls) Finish() []Event {
	evs := p.run(nil, true)
	evs = textEvent(evs, EventText, p.buf)
	p.buf = nil
	return evs
}

func (p *pythonicCalls) run(evs []Event, final bool) []Event {
	for {
		switch p.state {
		case 0:
			t := bytes.TrimLeft(p.buf, " \t\r\n")
			if len(t) == 0 {
				return evs
			}
			if t[0] == '[' {
				p.buf, p.state, p.marker = t, 2, ""
				continue
			}
			p.state = 1
		case 1:
			at, m := firstMarker(p.buf, pythonicOpens...)
			if at < 0 {
				keep := 0
				if !final {
					keep = partialSuffix(p.buf, pythonicOpens...)
				}
				evs = textEvent(evs, EventText, p.buf[:len(p.buf)-keep])
				p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
				return evs
			}
			evs = textEvent(evs, EventText, p.buf[:at])
			p.buf = p.buf[at:]
			p.marker, p.scanner = m, pyScanner{}
			p.state = 3
		case 2:
			// A bare list is calls only if it goes on with a name and "(".
			switch pyCallHead(p.buf) {
			case headNo:
				p.state = 1
			case headMaybe:
				if !final {
					return evs
				}
				p.state = 1
			case headYes:
				p.scanner = pyScanner{}
				p.state = 3
			}
		case 3:
			start := len(p.marker)
			list := bytes.TrimLeft(p.buf[start:], " \t\r\n")
			lead := len(p.buf) - len(list)
			if len(list) == 0 || list[0] != '[' {
				if len(list) == 0 && !final {
					return evs
				}
				// A marker not followed by a list: text.
				evs = textEvent(evs, EventText, p.buf[:lead])
				p.buf, p.state = p.buf[lead:], 1
				continue
			}
			end := p.scanner.end(list)
			if end < 0 {
				if !final && len(list) <= maxPythonicList {
					return evs
				}
				// Cut or unbounded: what was held is text.
				p.state = 1
				evs = textEvent(evs, EventText, p.buf)
				p.buf = p.buf[:0]
				return evs
			}
			parsed, err := parsePythonicCalls(list[:end])
			if err != nil {
				evs = textEvent(evs, EventText, p.buf[:lead+end])
			} else {
				for _, c := range parsed {
					evs = append(evs,
						Event{Kind: EventCallStart, Index: p.calls, Name: c.Name},
						Event{Kind: EventCallArgs, Index: p.calls, Text: []byte(c.Arguments)},
						Event{Kind: EventCallEnd, Index: p.calls})
					p.calls++
				}
			}
			p.buf = p.buf[lead+end:]
			p.state = 1
			if p.marker != "" && err == nil {
				p.state = 4
			}
		case 4:
			// The closing marker of a marked list is markup.
			t := bytes.TrimLeft(p.buf, " \t\r\n")
			if len(t) == 0 && !final {
				return evs
			}
			for _, c := range pythonicCloses {
				if bytes.HasPrefix(t, []byte(c)) {
					p.buf = t[len(c):]
					break
				}
				if !final && bytes.HasPrefix([]byte(c), t) {
					return evs
				}
			}
			p.state = 1
		}
	}
}

// Call-head states: whether a bare "[" opens a call list.
const (
	headNo = iota
	headMaybe
	headYes
)

// pyCallHead reads b, starting with "[", for blanks, a (dotted) name,
// blanks and "(".
func pyCallHead(b []byte) int {
	i := 1
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	n := i
	for i < len(b) && (isNameByte(b[i]) || (i > n && b[i] == '.')) {
		if i == n && b[i] >= '0' && b[i] <= '9' {
			return headNo
		}
		i++
	}
	if i-n > maxNameLen {
		return headNo
	}
	for i < len(b) && i > n && isBlank(b[i]) {
		i++
	}
	if i == len(b) {
		return headMaybe
	}
	if i > n && b[i] == '(' {
		return headYes
	}
	return headNo
}

func isNameByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// pyScanner finds the end of a Python bracketed expression arriving in
// pieces, honouring strings (both quotes, triple quotes, escapes). It
// resumes where the last call stopped.
type pyScanner struct {
	pos   int
	depth int
	quote byte // the open string's quote, 0 outside strings
	// triple: the open string is triple-quoted.
	triple bool
}

// end returns the length of the expression at the start of b, or -1 when
// b ends first.
func (s *pyScanner) end(b []byte) int {
	for s.pos < len(b) {
		c := b[s.pos]
		if s.quote != 0 {
			switch {
			case c == '\\':
				if s.pos+1 >= len(b) {
					return -1
				}
				s.pos += 2
				continue
			case c == s.quote && !s.triple:
				s.quote = 0
			case c == s.quote && s.triple:
				if s.pos+2 >= len(b) {
					return -1
				}
				if b[s.pos+1] == c && b[s.pos+2] == c {
					s.quote, s.triple = 0, false
					s.pos += 3
					continue
				}
			}
			s.pos++
			continue
		}
		switch c {
		case '\'', '"':
			if s.pos+2 >= len(b) {
				return -1 // a triple quote or not
			}
			s.quote = c
			if b[s.pos+1] == c && b[s.pos+2] == c {
				s.triple = true
				s.pos += 3
				continue
			}
		case '[', '(', '{':
			s.depth++
		case ']', ')', '}':
			s.depth--
			if s.depth <= 0 {
				s.pos++
				return s.pos
			}
		}
		s.pos++
	}
	return -1
}

// parsePythonicCalls reads a whole call list into calls with JSON
// arguments.
func parsePythonicCalls(b []byte) ([]Call, error) {
	p := &pyReader{s: b}
	if !p.eat('[') {
		return nil, p.errorf("a call list starts with [")
	}
	var out []Call
	for {
		p.blanks()
		if p.eat(']') {
			break
		}
		if len(out) > 0 {
			if !p.eat(',') {
				return nil, p.errorf("calls are separated by commas")
			}
			p.blanks()
			if p.eat(']') {
				break
			}
		}
		c, err := p.call()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, p.errorf("an empty call list")
	}
	if p.blanks(); p.i != len(p.s) {
		return nil, p.errorf("text after the call list")
	}
	return out, nil
}

// pyReader reads Python literals, writing them as JSON.
type pyReader struct {
	s []byte
	i int
}

func (p *pyReader) errorf(format string, a ...any) error {
	return fmt.Errorf("pythonic call at byte %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *pyReader) blanks() {
	for p.i < len(p.s) && isBlank(p.s[p.i]) {
		p.i++
	}
}

func (p *pyReader) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// name reads an identifier, dots allowed when dotted.
func (p *pyReader) name(dotted bool) string {
	start := p.i
	for p.i < len(p.s) && (isNameByte(p.s[p.i]) || (dotted && p.i > start && p.s[p.i] == '.')) {
		p.i++
	}
	if p.i == start || (p.s[start] >= '0' && p.s[start] <= '9') {
		p.i = start
		return ""
	}
	return string(p.s[start:p.i])
}

// call reads name(key=value, …).
func (p *pyReader) call() (Call, error) {
	name := p.name(true)
	if name == "" {
		return Call{}, p.errorf("a call starts with a function name")
	}
	p.blanks()
	if !p.eat('(') {
		return Call{}, p.errorf("%s is not called", name)
	}
	var args bytes.Buffer
	args.WriteByte('{')
	seen := map[string]bool{}
	for {
		p.blanks()
		if p.eat(')') {
			break
		}
		if len(seen) > 0 {
			if !p.eat(',') {
				return Call{}, p.errorf("arguments of %s are separated by commas", name)
			}
			p.blanks()
			if p.eat(')') {
				break
			}
		}
		key := p.name(false)
		p.blanks()
		if key == "" || !p.eat('=') {
			return Call{}, p.errorf("arguments of %s are keyword arguments (key=value)", name)
		}
		if seen[key] {
			return Call{}, p.errorf("argument %s of %s given twice", key, name)
		}
		p.blanks()
		if len(seen) > 0 {
			args.WriteByte(',')
		}
		seen[key] = true
		args.Write(jsonString(key))
		args.WriteByte(':')
		if err := p.value(&args, 0); err != nil {
			return Call{}, err
		}
	}
	args.WriteByte('}')
	return Call{Name: name, Arguments: args.String()}, nil
}

// maxPyDepth bounds the nesting of a value.
const maxPyDepth = 64

// value reads one literal into out as JSON.
func (p *pyReader) value(out *bytes.Buffer, depth int) error {
	if depth > maxPyDepth {
		return p.errorf("values nested deeper than %d", maxPyDepth)
	}
	if p.i >= len(p.s) {
		return p.errorf("a value is missing")
	}
	switch c := p.s[p.i]; {
	case c == '\'' || c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		out.Write(jsonString(s))
		return nil
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')' // a tuple is a JSON array
		}
		p.i++
		out.WriteByte('[')
		for n := 0; ; n++ {
			p.blanks()
			if p.eat(closer) {
				break
			}
			if n > 0 {
				if !p.eat(',') {
					return p.errorf("list items are separated by commas")
				}
				p.blanks()
				if p.eat(closer) {
					break
				}
				out.WriteByte(',')
			}
			if err := p.value(out, depth+1); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	case c == '{':
		p.i++
		out.WriteByte('{')
		for n := 0; ; n++ {
			p.blanks()
			if p.eat('}') {
				break
			}
			if n > 0 {
				if !p.eat(',') {
					return p.errorf("dict items are separated by commas")
				}
				p.blanks()
				if p.eat('}') {
					break
				}
				out.WriteByte(',')
			}
			if err := p.key(out); err != nil {
				return err
			}
			p.blanks()
			if !p.eat(':') {
				return p.errorf("a dict key is followed by a colon")
			}
			p.blanks()
			out.WriteByte(':')
			if err := p.value(out, depth+1); err != nil {
				return err
			}
		}
		out.WriteByte('}')
		return nil
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number(out)
	}
	switch w := p.name(false); w {
	case "True", "true":
		out.WriteString("true")
	case "False", "false":
		out.WriteString("false")
	case "None", "null":
		out.WriteString("null")
	default:
		return p.errorf("%q is not a literal", w)
	}
	return nil
}

// key reads a dict key: a string, or a number or constant, written as a
// string as Python's json.dumps writes one.
func (p *pyReader) key(out *bytes.Buffer) error {
	if p.i < len(p.s) && (p.s[p.i] == '\'' || p.s[p.i] == '"') {
		s, err := p.str()
		if err != nil {
			return err
		}
		out.Write(jsonString(s))
		return nil
	}
	var v bytes.Buffer
	start := p.i
	if err := p.value(&v, maxPyDepth); err != nil || v.Len() == 0 || v.Bytes()[0] == '[' || v.Bytes()[0] == '{' {
		p.i = start
		return p.errorf("a dict key is a string, a number or a constant")
	}
	out.Write(jsonString(v.String()))
	return nil
}

// number reads an int or a float, written as JSON: Python's forms that
// JSON lacks (1., .5, 1_000, +1, 0x1f) are converted.
func (p *pyReader) number(out *bytes.Buffer) error {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if (c == '+' || c == '-') && p.i > start && p.s[p.i-1] != 'e' && p.s[p.i-1] != 'E' {
			break
		}
		if !isNameByte(c) && c != '.' && c != '+' && c != '-' {
			break
		}
		p.i++
	}
	text := strings.TrimPrefix(strings.ReplaceAll(string(p.s[start:p.i]), "_", ""), "+")
	mag := strings.TrimPrefix(text, "-")
	switch {
	case isJSONNumber(text):
		out.WriteString(text)
		return nil
	case len(mag) > 2 && mag[0] == '0' && strings.IndexByte("xXoObB", mag[1]) >= 0:
		if i, err := strconv.ParseInt(text, 0, 64); err == nil {
			out.WriteString(strconv.FormatInt(i, 10))
			return nil
		}
	case strings.Trim(mag, "0123456789.eE+-") == "":
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			out.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			return nil
		}
	}
	p.i = start
	return p.errorf("%q is not a number", text)
}

// isJSONNumber reports text that is already a JSON number.
func isJSONNumber(text string) bool {
	i := 0
	if i < len(text) && text[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	n := digits()
	if n == 0 || (n > 1 && text[start] == '0') {
		return false
	}
	if i < len(text) && text[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(text)
}

// str reads a quoted string (single, double or triple quotes) and
// decodes its escapes as Python does; \/ also reads as "/", as in JSON,
// the forced shape's values being JSON.
func (p *pyReader) str() (string, error) {
	q := p.s[p.i]
	triple := p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("a string does not end")
		}
		c := p.s[p.i]
		switch {
		case c == q && !triple:
			p.i++
			return b.String(), nil
		case c == q && p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q:
			p.i += 3
			return b.String(), nil
		case c == '\n' && !triple:
			return "", p.errorf("a line break inside a string")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
			continue
		}
		b.WriteByte(c)
		p.i++
	}
}

// escape decodes the escape at p.i into b.
func (p *pyReader) escape(b *strings.Builder) error {
	if p.i+1 >= len(p.s) {
		return p.errorf("a string ends in a backslash")
	}
	c := p.s[p.i+1]
	p.i += 2
	simple := map[byte]string{'\\': `\`, '\'': `'`, '"': `"`, 'n': "\n", 't': "\t", 'r': "\r", 'b': "\b", 'f': "\f", 'v': "\v", 'a': "\a", '/': "/", '\n': ""}
	if s, ok := simple[c]; ok {
		b.WriteString(s)
		return nil
	}
	hex := func(n int) (rune, error) {
		if p.i+n > len(p.s) {
			return 0, p.errorf("a \\%c escape is cut", c)
		}
		v, err := strconv.ParseUint(string(p.s[p.i:p.i+n]), 16, 32)
		if err != nil {
			return 0, p.errorf("a \\%c escape is not hexadecimal", c)
		}
		p.i += n
		return rune(v), nil
	}
	switch c {
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		r, err := hex(n)
		if err != nil {
			return err
		}
		if c == 'u' && utf16.IsSurrogate(r) && p.i+6 <= len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
			// A JSON surrogate pair: one character.
			save := p.i
			p.i += 2
			if r2, err := hex(4); err == nil && utf16.DecodeRune(r, r2) != utf8.RuneError {
				r = utf16.DecodeRune(r, r2)
			} else {
				p.i = save
			}
		}
		if r > utf8.MaxRune {
			return p.errorf("a \\%c escape beyond Unicode", c)
		}
		b.WriteRune(r)
		return nil
	case '0', '1', '2', '3', '4', '5', '6', '7':
		v := int(c - '0')
		for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
			v = v*8 + int(p.s[p.i]-'0')
			p.i++
		}
		b.WriteRune(rune(v))
		return nil
	}
	// Python keeps an unknown escape as written.
	b.WriteByte('\\')
	b.WriteByte(c)
	return nil
}

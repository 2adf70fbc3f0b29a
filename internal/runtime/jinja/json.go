package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromJSONMemoryFactor is the memory FromJSON takes per byte of its
// input, for a caller to charge before it decodes text a request sent
// (tools, chat_template_kwargs): values are far larger than their text.
// 4 MiB of JSON left 14 (an object of short keys) to 40 (a list of empty
// objects) bytes a byte live, and allocated 34 to 102 in all.
const FromJSONMemoryFactor = 64

// FromJSON decodes JSON into template values: objects become *Dict in
// the order written, arrays List, integers int, other numbers float64.
func FromJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				d.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return d, nil
		case '[':
			l := List{}
			for dec.More() {
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return int(i), nil
		}
		return t.Float64()
	default:
		return t, nil // string, bool, nil
	}
}

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), arguments by position or
// keyword.
func filterToJSON(_ *renderer, v any, args []any, kwargs *Dict, _ *scope) (any, error) {
	a, err := filterArgs("tojson", args, kwargs, "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return nil, err
	}
	ensureASCII := false
	if _, given := kwargs.Get("ensure_ascii"); given || len(args) > 0 {
		ensureASCII = truthy(a[0])
	}
	d := &pyDumper{ensureASCII: ensureASCII, sortKeys: truthy(a[3]), itemSep: ", ", keySep: ": "}
	switch w := a[1].(type) {
	case nil:
	case int:
		d.indent, d.indented = strings.Repeat(" ", max(w, 0)), true
	case string:
		d.indent, d.indented = w, true
	default:
		return nil, fmt.Errorf("TypeError: tojson indent must be an int or str, not %s", typeName(w))
	}
	if d.indented {
		d.itemSep = ","
	}
	if a[2] != nil {
		seps := seqOf(a[2])
		if len(seps) != 2 {
			return nil, errors.New("ValueError: tojson separators must be a pair of strings")
		}
		is, ok1 := seps[0].(string)
		ks, ok2 := seps[1].(string)
		if !ok1 || !ok2 {
			return nil, errors.New("TypeError: tojson separators must be strings")
		}
		d.itemSep, d.keySep = is, ks
	}
	if err := d.value(v, 0); err != nil {
		return nil, err
	}
	return d.buf.String(), nil
}

// pyDumper writes values as Python's json.dumps does.
type pyDumper struct {
	buf             strings.Builder
	ensureASCII     bool
	sortKeys        bool
	indented        bool
	indent          string
	itemSep, keySep string
}

func (d *pyDumper) newline(depth int) {
	if !d.indented {
		return
	}
	d.buf.WriteByte('\n')
	for range depth {
		d.buf.WriteString(d.indent)
	}
}

func (d *pyDumper) value(v any, depth int) error {
	if depth > 1000 {
		return errors.New("RecursionError: tojson nests too deep")
	}
	v = plain(v)
	switch t := v.(type) {
	case nil:
		d.buf.WriteString("null")
	case bool:
		if t {
			d.buf.WriteString("true")
		} else {
			d.buf.WriteString("false")
		}
	case int:
		d.buf.WriteString(strconv.Itoa(t))
	case float64:
		d.buf.WriteString(jsonFloat(t))
	case string:
		d.str(t)
	case List, Tuple:
		items := seqOf(t)
		if len(items) == 0 {
			d.buf.WriteString("[]")
			return nil
		}
		d.buf.WriteByte('[')
		for i, x := range items {
			if i > 0 {
				d.buf.WriteString(d.itemSep)
			}
			d.newline(depth + 1)
			if err := d.value(x, depth+1); err != nil {
				return err
			}
		}
		d.newline(depth)
		d.buf.WriteByte(']')
	case *Dict:
		if t.Len() == 0 {
			d.buf.WriteString("{}")
			return nil
		}
		keys := t.keys
		if d.sortKeys {
			keys = append([]any(nil), keys...)
			if err := sortValues(keys, func(x any) any { return x }, false); err != nil {
				return err
			}
		}
		d.buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				d.buf.WriteString(d.itemSep)
			}
			d.newline(depth + 1)
			switch kk := k.(type) {
			case string:
				d.str(kk)
			case nil, bool, int, float64:
				var tmp pyDumper
				_ = tmp.value(kk, 0)
				d.str(tmp.buf.String())
			default:
				return fmt.Errorf("TypeError: keys must be str, int, float, bool or None, not %s", typeName(k))
			}
			d.buf.WriteString(d.keySep)
			if err := d.value(t.at(k), depth+1); err != nil {
				return err
			}
		}
		d.newline(depth)
		d.buf.WriteByte('}')
	default:
		return fmt.Errorf("TypeError: Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// jsonFloat is json.dumps of a float: repr, with NaN and Infinity.
func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return floatRepr(f)
}

func (d *pyDumper) str(s string) {
	b := &d.buf
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case !d.ensureASCII:
				b.WriteString(s[i : i+size])
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 || (d.ensureASCII && c == 0x7f) {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

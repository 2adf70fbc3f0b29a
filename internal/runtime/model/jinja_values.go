package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Values handed to a Jinja template must behave as Python's do, where the
// reference implementation (transformers' apply_chat_template) runs them.
// Two differences of gonja matter for chat templates and are covered here:
//
//   - Python dicts keep their insertion order, and templates print tools
//     with `tojson` or `items()`: the model was trained on the order the
//     client sent. Go maps have none, so every map built from JSON records
//     its key order in keyOrders, keyed by the map's identity, for the
//     lifetime of one rendering.
//   - gonja mis-indexes `xs[-1]` on one-element lists; jinjaList (the type
//     of every list given to a template, and of the `list` filter's result)
//     indexes as Python does.

// keyOrders maps a map's identity (its pointer) to its keys in order.
var keyOrders sync.Map

// orderedMaps remembers the maps of one rendering so their entries can be
// dropped from keyOrders afterwards.
type orderedMaps []uintptr

func (o *orderedMaps) record(m map[string]any, keys []string) {
	p := reflect.ValueOf(m).Pointer()
	keyOrders.Store(p, keys)
	*o = append(*o, p)
}

func (o *orderedMaps) release() {
	for _, p := range *o {
		keyOrders.Delete(p)
	}
	*o = (*o)[:0]
}

// orderedKeys returns m's keys in insertion order when recorded, else sorted
// (maps created by the template itself).
func orderedKeys(m reflect.Value) []string {
	if v, ok := keyOrders.Load(m.Pointer()); ok {
		keys := v.([]string)
		if len(keys) == m.Len() {
			return keys
		}
	}
	keys := make([]string, 0, m.Len())
	for _, k := range m.MapKeys() {
		keys = append(keys, fmt.Sprint(k.Interface()))
	}
	sortStrings(keys)
	return keys
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// jinjaList is a list as templates see it.
type jinjaList []any

// GetItem implements gonja's ItemGetter with Python's indexing.
func (l jinjaList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.AsValue(l[i]), true
}

// decodeOrdered decodes JSON into template values: objects become maps
// whose key order is recorded in o, arrays jinjaLists, integers int,
// other numbers float64.
func decodeOrdered(data []byte, o *orderedMaps) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, o)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, o *orderedMaps) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			var keys []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(dec, o)
				if err != nil {
					return nil, err
				}
				if _, dup := m[k]; !dup {
					keys = append(keys, k)
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			o.record(m, keys)
			return m, nil
		case '[':
			l := jinjaList{}
			for dec.More() {
				v, err := decodeValue(dec, o)
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
		if i, err := strconv.Atoi(string(t)); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False, indent=…)
// does, which is what transformers' `tojson` filter calls: ", " and ": "
// separators without indent, "," and ": " with it, dicts in insertion
// order.
type pyJSON struct {
	buf      []byte
	indent   string
	sortKeys bool
}

func (p *pyJSON) value(v any, depth int) error {
	if ev, ok := v.(*exec.Value); ok {
		if ev == nil || ev.IsNil() {
			p.buf = append(p.buf, "null"...)
			return nil
		}
		v = ev.Interface()
	}
	switch t := v.(type) {
	case nil:
		p.buf = append(p.buf, "null"...)
		return nil
	case string:
		p.str(t)
		return nil
	case bool:
		if t {
			p.buf = append(p.buf, "true"...)
		} else {
			p.buf = append(p.buf, "false"...)
		}
		return nil
	case float64:
		p.float(t)
		return nil
	case float32:
		p.float(float64(t))
		return nil
	case exec.Dict:
		return p.dict(&t, depth)
	case *exec.Dict:
		return p.dict(t, depth)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.buf = strconv.AppendInt(p.buf, rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		p.buf = strconv.AppendUint(p.buf, rv.Uint(), 10)
	case reflect.String:
		p.str(rv.String())
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			p.buf = append(p.buf, "[]"...)
			return nil
		}
		p.buf = append(p.buf, '[')
		for i := range rv.Len() {
			if i > 0 {
				p.sep()
			}
			p.newline(depth + 1)
			if err := p.value(rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		p.newline(depth)
		p.buf = append(p.buf, ']')
	case reflect.Map:
		if rv.Len() == 0 {
			p.buf = append(p.buf, "{}"...)
			return nil
		}
		keys := orderedKeys(rv)
		if p.sortKeys {
			keys = append([]string(nil), keys...)
			sortStrings(keys)
		}
		p.buf = append(p.buf, '{')
		for i, k := range keys {
			if i > 0 {
				p.sep()
			}
			p.newline(depth + 1)
			p.str(k)
			p.buf = append(p.buf, ": "...)
			if err := p.value(rv.MapIndex(reflect.ValueOf(k)).Interface(), depth+1); err != nil {
				return err
			}
		}
		p.newline(depth)
		p.buf = append(p.buf, '}')
	case reflect.Pointer:
		if rv.IsNil() {
			p.buf = append(p.buf, "null"...)
			return nil
		}
		return p.value(rv.Elem().Interface(), depth)
	default:
		return fmt.Errorf("tojson: cannot serialize %T", v)
	}
	return nil
}

func (p *pyJSON) dict(d *exec.Dict, depth int) error {
	if len(d.Pairs) == 0 {
		p.buf = append(p.buf, "{}"...)
		return nil
	}
	p.buf = append(p.buf, '{')
	for i, pair := range d.Pairs {
		if i > 0 {
			p.sep()
		}
		p.newline(depth + 1)
		p.str(pair.Key.String())
		p.buf = append(p.buf, ": "...)
		if err := p.value(pair.Value, depth+1); err != nil {
			return err
		}
	}
	p.newline(depth)
	p.buf = append(p.buf, '}')
	return nil
}

func (p *pyJSON) sep() {
	if p.indent == "" {
		p.buf = append(p.buf, ", "...)
	} else {
		p.buf = append(p.buf, ',')
	}
}

func (p *pyJSON) newline(depth int) {
	if p.indent == "" {
		return
	}
	p.buf = append(p.buf, '\n')
	for range depth {
		p.buf = append(p.buf, p.indent...)
	}
}

// float formats as Python's repr does: "1.0", "0.5", "1e-05", "1e+16".
func (p *pyJSON) float(f float64) {
	switch {
	case math.IsNaN(f):
		p.buf = append(p.buf, "NaN"...)
		return
	case math.IsInf(f, 1):
		p.buf = append(p.buf, "Infinity"...)
		return
	case math.IsInf(f, -1):
		p.buf = append(p.buf, "-Infinity"...)
		return
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e-05 / e+16 as Python does; only "e+00"-style padding
		// differs for one-digit exponents, which Go pads too.
		p.buf = append(p.buf, s...)
		return
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	p.buf = append(p.buf, s...)
	if f == math.Trunc(f) {
		p.buf = append(p.buf, ".0"...)
	}
}

// str writes a JSON string with Python's escapes (non-ASCII kept).
func (p *pyJSON) str(s string) {
	p.buf = append(p.buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				p.buf = append(p.buf, `\ufffd`...)
			} else {
				p.buf = append(p.buf, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			p.buf = append(p.buf, `\"`...)
		case '\\':
			p.buf = append(p.buf, `\\`...)
		case '\n':
			p.buf = append(p.buf, `\n`...)
		case '\r':
			p.buf = append(p.buf, `\r`...)
		case '\t':
			p.buf = append(p.buf, `\t`...)
		case '\b':
			p.buf = append(p.buf, `\b`...)
		case '\f':
			p.buf = append(p.buf, `\f`...)
		default:
			if c < 0x20 {
				p.buf = append(p.buf, fmt.Sprintf(`\u%04x`, c)...)
			} else {
				p.buf = append(p.buf, c)
			}
		}
		i++
	}
	p.buf = append(p.buf, '"')
}

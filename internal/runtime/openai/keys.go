package openai

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Go's decoder matches a JSON key to a field case-insensitively ("N" sets
// n, "MAX_TOKENS" max_tokens), so a key no API defines would change the
// request, and {"n":1,"N":3} would be resolved by key order. The request
// parsers refuse a top-level key that names a field only that way.

// fieldNames are the JSON names of the fields of a struct type, its
// embedded structs' included.
type fieldNames struct {
	exact  map[string]bool
	folded map[string]string // foldName(name) → name
}

var namesByType sync.Map // reflect.Type → *fieldNames

func namesOf(t reflect.Type) *fieldNames {
	if v, ok := namesByType.Load(t); ok {
		return v.(*fieldNames)
	}
	n := &fieldNames{exact: map[string]bool{}, folded: map[string]string{}}
	collectNames(t, n)
	namesByType.Store(t, n)
	return n
}

func collectNames(t reflect.Type, n *fieldNames) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			collectNames(f.Type, n)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		n.exact[name] = true
		n.folded[foldName(name)] = name
	}
}

// foldName folds a key as encoding/json does when it matches keys to
// fields: each rune upper-cased after lower-casing, so two names fold
// alike exactly when the decoder takes one for the other.
func foldName(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
}

// checkKeyCase refuses a key of keys (a request's top-level object) that
// is not one of dst's field names but matches one case-insensitively,
// naming the key.
func checkKeyCase(keys map[string]json.RawMessage, dst any) *Error {
	names := namesOf(reflect.TypeOf(dst))
	var bad []string
	for k := range keys {
		if names.exact[k] {
			continue
		}
		if _, ok := names.folded[foldName(k)]; ok {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad) // the same error for the same body
	k := bad[0]
	if !utf8.ValidString(k) {
		k = strings.ToValidUTF8(k, "\uFFFD")
	}
	return BadRequest(k, "unknown field %q: field names are case-sensitive; did you mean %q?", k, names.folded[foldName(bad[0])])
}

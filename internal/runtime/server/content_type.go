package server

import (
	"net/http"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// jsonContentType reports whether a POST body with Content-Type v is read
// as JSON: v absent, application/json or application/*+json, with any
// parameters (charset=utf-8). Every other type is refused (415): among
// them are the three a web page may send to any site without the
// browser asking the site first (CORS "simple requests": text/plain,
// application/x-www-form-urlencoded, multipart/form-data). Reading those
// as JSON would let any page a user opens run requests on a pod without
// API keys, the default, with the user's network position.
func jsonContentType(v string) bool {
	mt, _, _ := strings.Cut(v, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if mt == "" || mt == "application/json" {
		return true
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && strings.HasSuffix(sub, "+json")
}

// checkContentType refuses a POST whose body is not declared JSON
// (jsonContentType) with a 415, before its body is read.
func checkContentType(r *http.Request) *openai.Error {
	if r.Method != http.MethodPost {
		return nil
	}
	if v := r.Header.Get("Content-Type"); !jsonContentType(v) {
		return openai.UnsupportedMediaType(v)
	}
	return nil
}

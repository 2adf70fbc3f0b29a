package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// HeaderForwarded marks a request one pod forwarded to another: such a
// request runs where it lands, never held or forwarded again. Its value is
// "<nonce>.<mac>", the mac an HMAC-SHA256 over the nonce and the program id
// keyed with the pool's control token (Config.ForwardKey), which only the
// pool's pods hold. A value that does not verify is ignored, and clients'
// copies never get past ServeHTTP: no client can skip a pause or the gate
// by sending the header.
const HeaderForwarded = "X-Kvpilot-Forwarded"

// forwardedValue carries a request's HeaderForwarded value from ServeHTTP,
// which takes it out of the headers, to the gate, which knows the program.
type forwardedValue struct{}

// takeForwarded removes HeaderForwarded from r's headers and keeps its value
// in the context for verifyForwarded.
func takeForwarded(r *http.Request) *http.Request {
	v := r.Header.Get(HeaderForwarded)
	if v == "" {
		return r
	}
	r.Header.Del(HeaderForwarded)
	return r.WithContext(context.WithValue(r.Context(), forwardedValue{}, v))
}

// signForward is the HeaderForwarded value for a request of program pid.
func signForward(key []byte, pid string) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	n := hex.EncodeToString(nonce[:])
	return n + "." + forwardMAC(key, n, pid)
}

func forwardMAC(key []byte, nonce, pid string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kvpilot-forward\x00"))
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write([]byte(pid))
	return hex.EncodeToString(m.Sum(nil))
}

// verifyForwarded reports whether r came from another pod of the pool for
// program pid: it carried a HeaderForwarded value signed with this pod's
// key. Without a key nothing verifies.
func (s *Server) verifyForwarded(r *http.Request, pid string) bool {
	v, _ := r.Context().Value(forwardedValue{}).(string)
	if v == "" {
		return false
	}
	nonce, mac, ok := strings.Cut(v, ".")
	if !ok || len(s.cfg.ForwardKey) == 0 ||
		!hmac.Equal([]byte(mac), []byte(forwardMAC(s.cfg.ForwardKey, nonce, pid))) {
		s.log.Warn("ignoring a forwarded-request header that does not verify", "program", pid, "remote", r.RemoteAddr)
		return false
	}
	return true
}

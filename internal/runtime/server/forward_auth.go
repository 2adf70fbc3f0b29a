package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HeaderForwarded marks a request one pod forwarded to another: such a
// request runs where it lands, never held or forwarded again. Its value is
// "v3.<unix seconds>.<nonce>.<mac>", the mac an HMAC-SHA256 keyed with the
// pool's control token (Config.ForwardKey, which only the pool's pods
// hold) over the time, the nonce, the target pod's address (the one the
// sender forwards to, from its route; the receiver's
// Config.AdvertiseAddr, as placements name it), the method, the path and
// query, the program id (scoped to its owner, so the owner is bound too)
// and a SHA-256 of the body. A value verifies once, on the pod it was
// sent to, within ForwardWindow of its time: a replayed header, or one
// moved onto another pod, request, body or program, does not (the replay
// cache is per pod; naming the pod is what keeps a value from verifying
// once on each pod of the pool). A value that does not verify is ignored
// (the request is a plain one), and clients' copies never get past
// ServeHTTP: no client can skip a pause or the gate with it.
//
// Rolling upgrade: earlier pods sent "<unix seconds>.<nonce>.<mac>" (no
// version, no target). Between an old and a new pod neither format
// verifies on the other side (a new pod finds no "v3." prefix, an old one
// no number where the time should be), so a request forwarded across
// versions is a plain request where it lands (run if its program is
// active there, held if paused, or routed on as that pod sees it; while
// two such pods' routes disagree it may be forwarded back). It fails
// closed: nothing runs that a plain request could not run.
const HeaderForwarded = "X-Kvpilot-Forwarded"

// Bounds of forwarded-request verification.
const (
	// ForwardWindow is how far a forwarded request's time may be from the
	// receiving pod's clock, either way (the pods' clocks are NTP-synced;
	// a forward takes milliseconds).
	ForwardWindow = 30 * time.Second
	// maxSeenNonces bounds the replay cache: the nonces seen within the
	// last 2 × ForwardWindow. Beyond it (over 2,000 forwarded requests a
	// second, sustained) a forwarded request is taken as a plain one
	// rather than remembered in unbounded memory.
	maxSeenNonces = 1 << 17
)

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

// forwardVersion prefixes a HeaderForwarded value and names its MAC's
// domain; a value of another version does not verify.
const forwardVersion = "v3"

// signForward is the HeaderForwarded value for req, a request of program
// pid with this body, forwarded now to the pod at addr (the address its
// route names).
func (s *Server) signForward(req *http.Request, pid, addr string, body []byte) string {
	return forwardSignature(s.cfg.ForwardKey, s.clk.Now(), addr, req.Method, req.URL.RequestURI(), pid, body)
}

// forwardSignature is a HeaderForwarded value for the pod at target, with
// a fresh nonce.
func forwardSignature(key []byte, now time.Time, target, method, uri, pid string, body []byte) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	ts := strconv.FormatInt(now.Unix(), 10)
	n := hex.EncodeToString(nonce[:])
	return forwardVersion + "." + ts + "." + n + "." + forwardMAC(key, ts, n, target, method, uri, pid, body)
}

func forwardMAC(key []byte, ts, nonce, target, method, uri, pid string, body []byte) string {
	bodySum := sha256.Sum256(body)
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"kvpilot-forward-" + forwardVersion, ts, nonce, target, method, uri, pid} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	m.Write(bodySum[:])
	return hex.EncodeToString(m.Sum(nil))
}

// verifyForwarded reports whether r, with this body, came from another pod
// of the pool for program pid: it carried a HeaderForwarded value signed
// with this pod's key for this very request sent to this pod's
// advertised address, within ForwardWindow, whose nonce this pod has not
// seen before. Without a key or an advertised address nothing verifies.
func (s *Server) verifyForwarded(r *http.Request, pid string, body []byte) bool {
	v, _ := r.Context().Value(forwardedValue{}).(string)
	if v == "" {
		return false
	}
	reason := ""
	version, rest, _ := strings.Cut(v, ".")
	ts, rest, _ := strings.Cut(rest, ".")
	nonce, mac, _ := strings.Cut(rest, ".")
	sec, err := strconv.ParseInt(ts, 10, 64)
	now := s.clk.Now()
	at := time.Unix(sec, 0)
	switch {
	case len(s.cfg.ForwardKey) == 0:
		reason = "this pod has no forwarding key"
	case s.cfg.AdvertiseAddr == "":
		reason = "this pod has no advertised address"
	case version != forwardVersion:
		reason = "not a " + forwardVersion + " value (from a pod of another version?)"
	case err != nil || len(nonce) != 32 || mac == "":
		reason = "malformed"
	case !hmac.Equal([]byte(mac), []byte(forwardMAC(s.cfg.ForwardKey, ts, nonce, s.cfg.AdvertiseAddr, r.Method, r.URL.RequestURI(), pid, body))):
		reason = "signature does not match this request to this pod"
	case at.Before(now.Add(-ForwardWindow)) || at.After(now.Add(ForwardWindow)):
		reason = "outside the time window"
	case !s.nonces.add(nonce, at.Add(ForwardWindow), now):
		reason = "replayed"
	}
	if reason != "" {
		s.log.Warn("ignoring a forwarded-request header", "reason", reason, "program", pid, "remote", r.RemoteAddr)
		return false
	}
	return true
}

// nonceCache remembers the nonces of verified forwarded requests until
// their window ends, so that each verifies once. It holds at most
// maxSeenNonces; entries leave in arrival order once expired.
type nonceCache struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	order []nonceEntry // arrival order; a ring from head
	head  int
	max   int
}

type nonceEntry struct {
	nonce   string
	expires time.Time
}

func newNonceCache(limit int) *nonceCache {
	return &nonceCache{seen: make(map[string]time.Time), max: limit}
}

// add records nonce until expires; false if it was seen and has not
// expired, or the cache is full of unexpired nonces.
func (c *nonceCache) add(nonce string, expires, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, ok := c.seen[nonce]; ok && now.Before(exp) {
		return false
	}
	// Drop expired entries from the front. Expiry follows arrival within
	// 2 × ForwardWindow, so an unexpired front entry ends the sweep and a
	// late one waits behind it at most that long.
	for c.head < len(c.order) && !now.Before(c.order[c.head].expires) {
		e := c.order[c.head]
		if exp, ok := c.seen[e.nonce]; ok && exp.Equal(e.expires) {
			delete(c.seen, e.nonce)
		}
		c.order[c.head] = nonceEntry{}
		c.head++
	}
	if len(c.order)-c.head >= c.max {
		return false
	}
	if c.head > 0 && c.head >= len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	c.seen[nonce] = expires
	c.order = append(c.order, nonceEntry{nonce, expires})
	return true
}

package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/server"
)

// TestProcessForwardedHeaderReplayedOnAnotherPod (issue 34, item 4): a
// forwarded request's signed header, taken off the wire between two pods
// of a pool (a proxy in front of pod a records it), is replayed on pod b,
// where the program is paused: the signature names pod a, so pod b takes
// it as a plain request and holds it, running nothing.
func TestProcessForwardedHeaderReplayedOnAnotherPod(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := ln.Addr().String()
	// Pod a is reached, and advertises itself, at the proxy's address.
	a := startPod(t, "pod-a", "--advertise-addr", proxyAddr)
	captured := make(chan http.Header, 1)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: a.API})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(server.HeaderForwarded) != "" {
			select {
			case captured <- r.Header.Clone():
			default:
			}
		}
		proxy.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	b := startPod(t, "pod-b")
	c := startPod(t, "pod-c")
	b.push(&wire.Placement{Version: 1, Mode: "ProgramAware", Routes: map[string]string{"p": ""}})
	c.push(&wire.Placement{Version: 1, Mode: "ProgramAware", Routes: map[string]string{"p": proxyAddr}})

	const body = `{"prompt":"hello","max_tokens":4}`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r := post(ctx, c.API, "p", body); r.err != nil || r.status != http.StatusOK || r.header.Get("X-Kvpilot-Served-By") != proxyAddr {
		t.Fatalf("forwarded from pod c to pod a: %d %v served by %q: %s", r.status, r.err, r.header.Get("X-Kvpilot-Served-By"), r.body)
	}
	var h http.Header
	select {
	case h = <-captured:
	default:
		t.Fatal("the proxy saw no forwarded request")
	}

	replay, cancelReplay := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelReplay()
	req, err := http.NewRequestWithContext(replay, http.MethodPost, "http://"+b.API+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a header signed for pod a, replayed on pod b, was answered %d; it must be held (program p is paused there)", resp.StatusCode)
	}
	if m := b.metrics(); m["vllm:request_success_total"] != 0 || m["vllm:num_requests_running"] != 0 {
		t.Errorf("pod b ran the replayed request: %v finished, %v running", m["vllm:request_success_total"], m["vllm:num_requests_running"])
	}
}

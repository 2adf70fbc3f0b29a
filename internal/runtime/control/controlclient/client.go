// Package controlclient is the caller's side of the runtime pod's control
// API (package control serves it): a client for its state reads, placement
// pushes and KV fetches, and its errors. It depends on the wire format
// alone, so the controller reaches pods without linking the pod's program
// table, KV cache or executors.
package controlclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// StatusError is a control API call a pod answered with a status other
// than 200.
type StatusError struct {
	Method, URL string
	Code        int
	Status      string
	Message     string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("control %s %s: %s: %s", e.Method, e.URL, e.Status, e.Message)
}

// IsUnauthorized reports whether err, or any error it wraps or joins, is a
// pod refusing the caller's token (401 or 403): the token is stale, unlike
// a pod that is down or slow, for which reading it again would not help.
func IsUnauthorized(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *StatusError:
		return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if IsUnauthorized(inner) {
				return true
			}
		}
		return false
	}
	return IsUnauthorized(errors.Unwrap(err))
}

// Client talks to pods' control APIs. It never follows a redirect: the
// bearer token is the pool's, and Go's client would send it on to wherever
// a pod (or a peer serving KV) redirects on the same host. A pod's control
// API never redirects, so a redirect is an error (StatusError with the 3xx).
type Client struct {
	HTTP  *http.Client
	Token string
}

// New returns a client with a bounded per-call timeout.
func New(token string, timeout time.Duration) *Client {
	return &Client{HTTP: &http.Client{Timeout: timeout, CheckRedirect: refuseRedirect}, Token: token}
}

func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Send adds the token to req and sends it without following redirects,
// whatever c.HTTP's CheckRedirect says: for calls beyond State and Push
// (a KV fetch).
func (c *Client) Send(req *http.Request) (*http.Response, error) {
	var hc http.Client // a copy shares the transport and its connections
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = refuseRedirect
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return hc.Do(req)
}

// State reads a pod's report; addr is host:port of its control API.
func (c *Client) State(ctx context.Context, addr string) (*wire.Report, error) {
	var rep wire.Report
	if err := c.do(ctx, http.MethodGet, addr, wire.StatePath, nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Push sends a placement.
func (c *Client) Push(ctx context.Context, addr string, p *wire.Placement) (*wire.PlacementResult, error) {
	var res wire.PlacementResult
	if err := c.do(ctx, http.MethodPut, addr, wire.PlacementPath, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (c *Client) do(ctx context.Context, method, addr, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Send(req)
	if err != nil {
		return fmt.Errorf("control %s %s: %w", method, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &StatusError{Method: method, URL: addr + path, Code: resp.StatusCode, Status: resp.Status,
			Message: strings.TrimSpace(string(msg))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("control %s %s%s: decode: %w", method, addr, path, err)
	}
	return nil
}

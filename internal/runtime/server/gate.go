package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// routeRelease ends a program (ThunderAgent's release call).
const routeRelease = "/programs/release"

// admitProgram runs the program gate for a request of program pid: it
// returns true when the request is to run on this pod (the caller must then
// call programDone or programAbandon), false when it was forwarded, or its
// client went away while it was held, and the response is already written.
func (s *Server) admitProgram(w http.ResponseWriter, r *http.Request, pid string, body []byte) bool {
	forwarded := s.verifyForwarded(r, pid)
	for {
		rt := s.cfg.Programs.Route(pid, forwarded)
		switch rt.Kind {
		case programs.Local:
			return true
		case programs.Forward:
			s.forward(w, r, rt.Addr, pid, body)
			return false
		}
		// Held while the program is paused: wait for a placement (or the
		// pod's own force-resume), then ask again.
		s.heldGauge.Inc()
		select {
		case <-rt.Wait:
			s.heldGauge.Dec()
			s.cfg.Programs.Unhold(pid)
		case <-r.Context().Done():
			s.heldGauge.Dec()
			s.cfg.Programs.Unhold(pid)
			w.WriteHeader(statusClientClosed)
			return false
		}
	}
}

// forward proxies the request once to the pod at addr and streams its
// response back as it comes.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, addr, pid string, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.writeError(w, openai.Internal("forward: "+err.Error()))
		return
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept", "X-Program-Id", "X-Session-ID", "X-Request-Id"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(HeaderForwarded, signForward(s.cfg.ForwardKey, pid))
	resp, err := s.forwarder.Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			w.WriteHeader(statusClientClosed)
			return
		}
		s.log.Warn("forwarding failed", "to", addr, "err", err)
		s.writeError(w, openai.Unavailable("the pod running this program ("+addr+") is unreachable; retry"))
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After", "X-Request-Id", "WWW-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set("X-Kvpilot-Served-By", addr)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client went away; r.Context() cancels upstream
			}
			_ = rc.Flush()
		}
		if err != nil {
			if err != io.EOF {
				s.log.Debug("forwarded response ended early", "from", addr, "err", err)
			}
			return
		}
	}
}

// releaseProgram serves POST /programs/release {"program_id": "..."}.
func (s *Server) releaseProgram(w http.ResponseWriter, r *http.Request) {
	body, apiErr := s.readBody(w, r)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	var req struct {
		ProgramID string `json:"program_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, openai.BadRequest("", "invalid JSON: %v", err))
		return
	}
	if req.ProgramID == "" {
		req.ProgramID = r.Header.Get("X-Program-Id")
	}
	if req.ProgramID == "" {
		s.writeError(w, openai.BadRequest("program_id", "program_id is required"))
		return
	}
	released := false
	if s.cfg.Programs != nil {
		released = s.cfg.Programs.Release(req.ProgramID)
		if addr, ok := s.cfg.Programs.RouteOf(req.ProgramID); ok && !s.verifyForwarded(r, req.ProgramID) {
			// Tell the pod running it too; best effort, bounded.
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			fr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+routeRelease, bytes.NewReader(body))
			if err == nil {
				fr.Header.Set("Content-Type", "application/json")
				fr.Header.Set(HeaderForwarded, signForward(s.cfg.ForwardKey, req.ProgramID))
				if v := r.Header.Get("Authorization"); v != "" {
					fr.Header.Set("Authorization", v)
				}
				if resp, err := s.forwarder.Do(fr); err == nil {
					released = released || resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"program_id": req.ProgramID, "released": released})
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// routeRelease ends a program (ThunderAgent's release call).
const routeRelease = "/programs/release"

// codeProgramLimit is the error code of a request refused for its API
// key's limit on live programs.
const codeProgramLimit = "program_limit"

// admitProgram carries a request of program pid through the program gate
// (programs.Gate, which decides): it returns true when the request is to
// run on this pod, with its ticket (the caller must then call programDone
// with it), false when it was forwarded, refused, or its client went away
// while it was held, and the response is already written.
func (s *Server) admitProgram(w http.ResponseWriter, r *http.Request, prog program, body []byte) (programs.Ticket, bool) {
	pid := prog.ID
	g := s.cfg.Programs.Gate(prog.Owner, pid, s.verifyForwarded(r, pid, body))
	rt := g.Route()
	if rt.Kind == programs.Hold {
		s.heldGauge.Inc()
		var err error
		rt, err = g.Await(r.Context(), s.drainCtx.Done(), rt)
		s.heldGauge.Dec()
		if err != nil {
			w.WriteHeader(statusClientClosed)
			return programs.Ticket{}, false
		}
	}
	switch rt.Kind {
	case programs.Local:
		return rt.Ticket, true
	case programs.Forward:
		if g.Drained() {
			s.log.Info("draining: forwarding a held request to its program's pod", "program", pid, "to", rt.Addr)
		}
		s.forward(w, r, pid, rt.Addr, body)
	case programs.Limited:
		w.Header().Set("Retry-After", strconv.Itoa(int((rt.RetryAfter+time.Second-1)/time.Second)))
		s.writeError(w, &openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit,
			Code: codeProgramLimit, Param: "program_id", Message: fmt.Sprintf(
				"this API key has %d live programs on this pod, its limit; release one (POST %s) or retry when one has idled out",
				s.cfg.Programs.MaxProgramsPerOwner(), routeRelease)})
	case programs.Unavailable:
		// The pod started draining while the request was held
		// (programs.Gate.Drain).
		s.log.Info("draining: answering a held request 503", "program", pid)
		s.writeError(w, openai.Unavailable(fmt.Sprintf("this pod is shutting down and program %q is paused; retry", programs.ClientID(pid))))
	}
	return programs.Ticket{}, false
}

// The headers a forwarded request carries to the pod that runs it (the API
// key among them: the owner is derived there from the same key, so the
// program keeps its owner across pods; every header that can name the
// program, so that pod derives the same one) and those of its response
// that come back.
var (
	forwardedRequestHeaders = append([]string{"Authorization", HeaderAPIKey, "Content-Type", "Accept",
		"X-Program-Id", "X-Session-ID", "X-Request-Id"}, openai.ProgramSessionHeaders...)
	forwardedResponseHeaders = []string{"Content-Type", "Cache-Control", "Retry-After", "X-Request-Id", "WWW-Authenticate",
		HeaderToolsDropped}
)

func copyHeaders(dst, src http.Header, names []string) {
	for _, h := range names {
		if v := src.Get(h); v != "" {
			dst.Set(h, v)
		}
	}
}

// forward proxies the request of program pid once to the pod at addr and
// streams its response back as it comes. The drain deadline
// (AbortForwards) cuts it short like a local request.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, pid, addr string, body []byte) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.abortCtx, cancel)()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.writeError(w, openai.Internal("forward: "+err.Error()))
		return
	}
	copyHeaders(req.Header, r.Header, forwardedRequestHeaders)
	req.Header.Set(HeaderForwarded, s.signForward(req, pid, addr, body))
	resp, err := s.forwarder.Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			w.WriteHeader(statusClientClosed)
			return
		}
		if s.abortCtx.Err() != nil {
			s.writeError(w, openai.Unavailable("the server shut down before the forwarded request was answered; retry"))
			return
		}
		s.log.Warn("forwarding failed: the program's pod is unreachable", "program", pid, "pod", addr, "err", err)
		s.writeError(w, openai.UpstreamUnavailable(fmt.Sprintf("the pod running program %q (%s) is unreachable; retry", programs.ClientID(pid), addr)))
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header, forwardedResponseHeaders)
	w.Header().Set("X-Kvpilot-Served-By", addr)
	w.WriteHeader(resp.StatusCode)
	sw := s.newStreamWriter(w, r, nil) // a stall fails the next write, which cancels upstream
	defer sw.done()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if werr := sw.write(buf[:n], true); werr != nil {
				// The client went away or stopped reading: returning
				// cancels the upstream request, which frees its KV there.
				var stalled *errStalled
				if errors.As(werr, &stalled) {
					s.stalled.WithLabelValues(stalled.reason).Inc()
					s.log.Info("client stopped reading a forwarded response; cancelled", "program", pid, "pod", addr, "reason", stalled.reason)
				}
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				s.log.Debug("forwarded response ended early", "from", addr, "err", err)
			}
			return
		}
	}
}

// releaseProgram serves POST /programs/release {"program_id": "..."}. The
// program is named as on the generation endpoints (programOf): by its
// headers or the body's program_id; a client naming it by header alone
// may send no body.
func (s *Server) releaseProgram(w http.ResponseWriter, r *http.Request) {
	body, apiErr := s.readBody(w, r)
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	var req struct {
		ProgramID openai.ProgramIDText `json:"program_id"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			var e *openai.Error
			if !errors.As(err, &e) {
				e = openai.BadRequest("", "invalid JSON: %v", err)
			}
			s.writeError(w, e)
			return
		}
	}
	prog, apiErr := s.programOf(r, openai.BodyProgram{ID: string(req.ProgramID)})
	if apiErr == nil && prog.ID == "" {
		apiErr = openai.BadRequest("program_id", "program_id is required")
	}
	if apiErr != nil {
		s.writeError(w, apiErr)
		return
	}
	released := false
	if s.cfg.Programs != nil {
		var addr string
		released, addr = s.cfg.Programs.ReleaseRouted(prog.ID)
		if addr != "" && !s.verifyForwarded(r, prog.ID, body) {
			// Tell the pod running it too (as the same key); best effort,
			// bounded.
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			fr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+routeRelease, bytes.NewReader(body))
			if err == nil {
				copyHeaders(fr.Header, r.Header, forwardedRequestHeaders)
				fr.Header.Set("Content-Type", "application/json")
				fr.Header.Set(HeaderForwarded, s.signForward(fr, prog.ID, addr, body))
				if resp, err := s.forwarder.Do(fr); err == nil {
					released = released || resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"program_id": prog.Name, "released": released})
}

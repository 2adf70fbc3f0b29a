package nodeagent

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type probeKind int

const (
	probeStartup probeKind = iota
	probeReadiness
	probeLiveness
)

type probeResult struct {
	c    *container
	cmd  any // the process probed; a result about an earlier one is dropped
	kind probeKind
	ok   bool
}

// probeClient never reuses connections: a probe must see a pod that went
// away, not a kept-alive socket.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// probe starts the container's due probes, each in its own goroutine. HTTP
// GET probes only (the runtime's); a container without a readiness probe is
// ready once started. Until its first success a probe runs every 0.5 s
// rather than every period, so pods become ready promptly.
func (w *podWorker) probe(c *container, now time.Time) {
	if !c.startupOK {
		if p := c.spec.StartupProbe; p != nil && !c.inFlight[probeStartup] && !now.Before(c.nextStartup) {
			c.nextStartup = now.Add(fastProbePeriod)
			w.runProbe(c, probeStartup, p)
		}
		return
	}
	if p := c.spec.ReadinessProbe; p == nil {
		c.status.Ready = true
	} else if !c.inFlight[probeReadiness] && !now.Before(c.nextReady) {
		c.nextReady = now.Add(period(p, c.readyOK > 0))
		w.runProbe(c, probeReadiness, p)
	}
	if p := c.spec.LivenessProbe; p != nil && !c.inFlight[probeLiveness] && !now.Before(c.nextLive) {
		c.nextLive = now.Add(period(p, true))
		w.runProbe(c, probeLiveness, p)
	}
}

func period(p *corev1.Probe, steady bool) time.Duration {
	if !steady {
		return fastProbePeriod
	}
	return time.Duration(max(p.PeriodSeconds, 1)) * time.Second
}

func (w *podWorker) runProbe(c *container, kind probeKind, p *corev1.Probe) {
	get := p.HTTPGet
	if get == nil {
		// Exec, TCP and gRPC probes are not run locally: count them passed.
		w.probed(probeResult{c: c, cmd: c.cmd, kind: kind, ok: true})
		return
	}
	port := get.Port.IntValue()
	if get.Port.Type == intstr.String {
		for _, cp := range c.spec.Ports {
			if cp.Name == get.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	url := "http://" + net.JoinHostPort(w.ip, strconv.Itoa(port)) + get.Path
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	c.inFlight[kind] = true
	cmd := c.cmd
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ok := false
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err == nil {
			if resp, err := probeClient.Do(req); err == nil {
				resp.Body.Close()
				ok = resp.StatusCode >= 200 && resp.StatusCode < 400
			}
		}
		select {
		case w.probes <- probeResult{c: c, cmd: cmd, kind: kind, ok: ok}:
		case <-w.done:
		}
	}()
}

// probed applies a probe's result: readiness flips Ready after
// successThreshold / failureThreshold results in a row; a failed startup
// or liveness probe restarts the container, as a kubelet does.
func (w *podWorker) probed(r probeResult) {
	c := r.c
	c.inFlight[r.kind] = false
	if c.cmd == nil || any(c.cmd) != r.cmd {
		return
	}
	switch r.kind {
	case probeStartup:
		p := c.spec.StartupProbe
		if r.ok {
			c.startupOK = true
			return
		}
		limit := time.Duration(max(p.FailureThreshold, 1)*max(p.PeriodSeconds, 1)) * time.Second
		if time.Since(c.started) > limit {
			w.log.Info("startup probe failed; restarting", "container", c.spec.Name)
			c.signal(syscall.SIGKILL)
		}
	case probeReadiness:
		p := c.spec.ReadinessProbe
		if r.ok {
			c.readyOK++
			c.readyFails = 0
			if c.readyOK >= int(max(p.SuccessThreshold, 1)) {
				c.status.Ready = true
			}
			return
		}
		c.readyFails++
		if c.readyFails >= int(max(p.FailureThreshold, 1)) {
			c.readyOK = 0
			c.status.Ready = false
		}
	case probeLiveness:
		p := c.spec.LivenessProbe
		if r.ok {
			c.liveFails = 0
			return
		}
		c.liveFails++
		if c.liveFails >= int(max(p.FailureThreshold, 1)) {
			w.log.Info("liveness probe failed; restarting", "container", c.spec.Name)
			c.signal(syscall.SIGTERM)
		}
	}
}

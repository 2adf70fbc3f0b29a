package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

const (
	startTimeout = 60 * time.Second
	exitTimeout  = 30 * time.Second
)

// TestProcessDrainsOnSIGTERM builds the binary, serves the sim executor on a
// free port, and sends SIGTERM while a streaming request is in flight: the
// request must complete and the process exit 0.
func TestProcessDrainsOnSIGTERM(t *testing.T) {
	p := runtimeproc.Start(t, runtimeproc.Options{
		Name: "runtime",
		Args: []string{"--executor", "sim", "--host", "127.0.0.1", "--port", "0", "--drain-timeout", "20s"},
		Env:  cleanEnv(),
	})
	// --port 0: the address the runtime bound is in its ready line.
	readyLine := regexp.MustCompile(`msg=ready addr=(\S+)`)
	var addr string
	poll.Until(t, startTimeout, "the ready line", func() bool {
		if m := readyLine.FindStringSubmatch(p.Log()); m != nil {
			addr = m[1]
			return true
		}
		select {
		case <-p.Exited():
			t.Fatalf("process exited before ready: %v\n%s", p.ExitErr(), p.Log())
		default:
		}
		return false
	})
	base := "http://" + addr
	if r, err := http.Get(base + "/ready"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("/ready: %v %v", r, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), exitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(
		`{"prompt":"agents call tools","max_tokens":150,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var events []string
	signalled := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events = append(events, data)
		if !signalled && strings.Contains(data, `"text"`) {
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("stream broken after SIGTERM: %v\n%s", err, p.Log())
	}
	if !signalled || len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	var usage openai.CompletionResponse
	if err := json.Unmarshal([]byte(events[len(events)-2]), &usage); err != nil || usage.Usage == nil || usage.Usage.CompletionTokens != 150 {
		t.Errorf("usage event %s (%v): want 150 completion tokens", events[len(events)-2], err)
	}

	select {
	case <-p.Exited():
		if err := p.ExitErr(); err != nil {
			t.Fatalf("exit: %v\n%s", err, p.Log())
		}
	case <-time.After(exitTimeout):
		t.Fatalf("still running %v after SIGTERM\n%s", exitTimeout, p.Log())
	}
	if !strings.Contains(p.Log(), "msg=stopped") {
		t.Errorf("no stop log:\n%s", p.Log())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("port still open after exit")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Logf("dial after exit: %v", err)
	}
}

// cleanEnv is the environment without KVPILOT_ settings that would change
// the flags under test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

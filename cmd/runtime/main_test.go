package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

const (
	startTimeout = 60 * time.Second
	exitTimeout  = 30 * time.Second
)

// TestProcessDrainsOnSIGTERM builds the binary, serves the sim executor on a
// free port, and sends SIGTERM while a streaming request is in flight: the
// request must complete and the process exit 0.
func TestProcessDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary with")
	}
	bin := filepath.Join(t.TempDir(), "runtime")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "--executor", "sim", "--host", "127.0.0.1", "--port", "0", "--drain-timeout", "20s")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	addrCh := make(chan string, 1)
	var logTail strings.Builder
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		readyLine := regexp.MustCompile(`msg=ready addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logTail.WriteString(line + "\n")
			if m := readyLine.FindStringSubmatch(line); m != nil {
				addrCh <- m[1]
			}
		}
	}()
	go func() { <-logDone; exited <- cmd.Wait() }()

	var addr string
	select {
	case addr = <-addrCh:
	case err := <-exited:
		t.Fatalf("process exited before ready: %v\n%s", err, logTail.String())
	case <-time.After(startTimeout):
		t.Fatalf("not ready after %v", startTimeout)
	}
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
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("stream broken after SIGTERM: %v\n%s", err, logTail.String())
	}
	if !signalled || len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	var usage openai.CompletionResponse
	if err := json.Unmarshal([]byte(events[len(events)-2]), &usage); err != nil || usage.Usage == nil || usage.Usage.CompletionTokens != 150 {
		t.Errorf("usage event %s (%v): want 150 completion tokens", events[len(events)-2], err)
	}

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logTail.String())
		}
	case <-time.After(exitTimeout):
		t.Fatalf("still running %v after SIGTERM\n%s", exitTimeout, logTail.String())
	}
	if !strings.Contains(logTail.String(), "msg=stopped") {
		t.Errorf("no stop log:\n%s", logTail.String())
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

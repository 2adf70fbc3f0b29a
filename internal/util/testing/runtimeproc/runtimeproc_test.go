package runtimeproc

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
)

// TestStartPodServesAndStops: the pod is ready on its API address, its
// control API takes the token StartPod wrote, and after SIGTERM Exited is
// closed with the whole log, down to the runtime's last line, in Log.
func TestStartPodServesAndStops(t *testing.T) {
	const token = "runtimeproc-token"
	p := StartPod(t, PodOptions{Options: Options{Name: "pod-t", Args: []string{"--kv-cache-blocks", "64"}}, ControlToken: token})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := controlclient.New(token, 5*time.Second).State(ctx, p.Control)
	if err != nil {
		t.Fatalf("control API with the pod's token: %v", err)
	}
	if rep.Pod != "pod-t" {
		t.Errorf("control API of pod %q; want pod-t", rep.Pod)
	}
	if _, err := controlclient.New("wrong", 5*time.Second).State(ctx, p.Control); err == nil {
		t.Errorf("control API took a wrong token")
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM")
	}
	if err := p.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if !strings.Contains(p.Log(), "msg=stopped") {
		t.Errorf("the log misses the runtime's last line:\n%s", p.Log())
	}
}

// fatalTB stops the code run under it at its first Fatal, as t.Fatal
// does, and keeps the message instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartPodFailsWhenTheProcessExits: a pod that exits while starting
// fails the test at once, with the process's log, not after the ready
// timeout (an hour here, so a harness that waited for it would be caught
// however loaded the machine).
func TestStartPodFailsWhenTheProcessExits(t *testing.T) {
	Binary(t) // skips here, on the test's goroutine, under -short
	f := &fatalTB{TB: t}
	const readyTimeout = time.Hour
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartPod(f, PodOptions{Options: Options{Name: "pod-bad", Args: []string{"--no-such-flag"}}, ReadyTimeout: readyTimeout})
	}()
	select {
	case <-done:
	case <-time.After(readyTimeout / 12):
		t.Fatalf("the early exit was not reported within %v (the ready timeout is %v)", readyTimeout/12, readyTimeout)
	}
	if !strings.Contains(f.msg, "pod-bad exited during start") || !strings.Contains(f.msg, "no-such-flag") {
		t.Errorf("StartPod failed with %q; want the early exit and the log naming the bad flag", f.msg)
	}
}

// TestStartPodRetriesATakenAddress: when an address StartPod picked is
// taken before the pod binds it, the pod exits at start and StartPod starts
// it again on other addresses.
func TestStartPodRetriesATakenAddress(t *testing.T) {
	Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken, calls := l.Addr().String(), 0
	podAddr = func(t testing.TB) string {
		if calls++; calls == 1 {
			return taken // the first attempt's API address is in use
		}
		return FreeAddr(t)
	}
	defer func() { podAddr = FreeAddr }()
	p := StartPod(t, PodOptions{Options: Options{Name: "pod-r", Args: []string{"--kv-cache-blocks", "64"}}, ControlToken: "t"})
	if p.API == taken || calls != 4 {
		t.Errorf("pod on %s after %d addresses; want a second start on addresses other than %s", p.API, calls, taken)
	}
}

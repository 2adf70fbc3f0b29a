// Package runtimeproc runs the runtime binary (cmd/runtime) as real
// processes on loopback, for the tests that need a pod as a process: its
// flags, its signal handling, several pods forwarding to each other, the
// fleet loop against them. It is imported only from _test.go files.
//
// The binary is built once per test binary. Each process's stdout and
// stderr are kept, printed when the test fails, and complete once the
// process has exited. At cleanup a process gets SIGTERM, and SIGKILL if it
// has not exited after its stop timeout.
package runtimeproc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// Package is the import path of the runtime binary's main package.
const Package = "github.com/kvpilot/kvpilot/cmd/runtime"

// Defaults for the zero values of Options.StopTimeout and
// PodOptions.ReadyTimeout.
const (
	DefaultStopTimeout  = 20 * time.Second
	DefaultReadyTimeout = 60 * time.Second
)

// builds holds Build's binaries by package, each built once.
var builds struct {
	mu    sync.Mutex
	byPkg map[string]*built
}

type built struct {
	once sync.Once
	path string
	err  error
}

// EnvBinary names a runtime binary built beforehand, which Binary returns
// instead of building one: for a test binary (`go test -c`) carried to a
// machine without Go, such as a GPU machine.
const EnvBinary = "KVPILOT_RUNTIME_BIN"

// Binary returns the runtime binary, built with `go build` on first use and
// shared by every test of the test binary, or the one $KVPILOT_RUNTIME_BIN
// names. It skips t under -short.
func Binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the runtime binary")
	}
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", EnvBinary, err)
		}
		return p
	}
	return Build(t, Package, "kvpilot-runtime")
}

// Build returns the binary of the main package pkg (an import path),
// named name, built with `go build` on first use and shared by every test
// of the test binary: the runtime, or a command a test runs beside it
// (kvpilot-model writing its models).
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.byPkg == nil {
		builds.byPkg = map[string]*built{}
	}
	b := builds.byPkg[pkg]
	if b == nil {
		b = &built{}
		builds.byPkg[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// FreeAddr returns a loopback address, "127.0.0.1:port", that nothing
// listened on when it was called.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Options says how to run one runtime process.
type Options struct {
	// Name names the process in failure messages and its log dump.
	Name string
	// Args are the runtime's flags.
	Args []string
	// Env is the process's environment; nil is this process's.
	Env []string
	// StopTimeout is how long cleanup waits after SIGTERM before it kills
	// the process; 0 is DefaultStopTimeout.
	StopTimeout time.Duration
	// MaxOpenFiles, when set, is the process's limit on open files (soft
	// and hard, so the Go runtime cannot raise it), set right after it
	// starts. Where that cannot be done (not Linux) the test is skipped.
	MaxOpenFiles uint64
}

// Process is one running runtime binary.
type Process struct {
	Name string

	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	log     logBuffer
}

// Start starts the runtime binary with o.Args and returns without waiting
// for it to serve. Cleanup stops it (SIGTERM, then SIGKILL after
// o.StopTimeout) and, when t failed, logs its output.
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	p := &Process{Name: o.Name, exited: make(chan struct{})}
	p.cmd = exec.Command(Binary(t), o.Args...)
	p.cmd.Env = o.Env
	// One writer for both streams (exec then writes from one goroutine at
	// a time), and not a pipe read line by line: Wait returns only once
	// everything the process wrote is in p.log.
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", o.Name, err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.exited) }()
	if o.MaxOpenFiles > 0 {
		if err := limitOpenFiles(p.cmd.Process.Pid, o.MaxOpenFiles); err != nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Skipf("%s: %v", o.Name, err)
		}
	}
	stop := o.StopTimeout
	if stop == 0 {
		stop = DefaultStopTimeout
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stop):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s logs ---\n%s", p.Name, p.Log())
		}
	})
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited and all its output is in
// Log.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr waits for the process to exit and says how it did (nil: status
// 0).
func (p *Process) ExitErr() error {
	<-p.exited
	return p.exitErr
}

// PeakRSS is the most resident memory the process has held so far, in
// bytes (Linux's VmHWM): what a memory limit on the pod would meet. Where
// it cannot be read (not Linux) the test is skipped.
func (p *Process) PeakRSS(t testing.TB) int64 {
	t.Helper()
	n, err := peakRSS(p.cmd.Process.Pid)
	if err != nil {
		t.Skipf("%s: %v", p.Name, err)
	}
	return n
}

// LimitMemory caps the memory the process may still take at extra bytes
// beyond what its data segment holds now (Linux's RLIMIT_DATA, which
// counts the Go heap's mappings): past it an allocation fails and the Go
// runtime exits, as a pod meeting its memory limit is killed. Where it
// cannot be set (not Linux) the test is skipped.
func (p *Process) LimitMemory(t testing.TB, extra int64) {
	t.Helper()
	if err := limitData(p.cmd.Process.Pid, extra); err != nil {
		t.Skipf("%s: %v", p.Name, err)
	}
}

// Log is everything the process has written to stdout and stderr so far.
func (p *Process) Log() string { return p.log.String() }

// WaitReady polls http://addr/ready until it answers 200. It fails t, with
// the process's log, when the process exits first or timeout passes.
func (p *Process) WaitReady(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	if err := p.waitReady(addr, timeout); err != nil {
		t.Fatal(err)
	}
}

// readyClient polls /ready: a poll that hangs (something else listens on
// the address) gives up and the process is looked at again.
var readyClient = &http.Client{Timeout: time.Second}

// errExitedDuringStart is waitReady's error when the process exits before
// it is ready.
var errExitedDuringStart = errors.New("exited during start")

func (p *Process) waitReady(addr string, timeout time.Duration) error {
	exited := false
	ready := poll.Wait(timeout, func() bool {
		select {
		case <-p.exited:
			exited = true
			return true
		default:
		}
		resp, err := readyClient.Get("http://" + addr + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case exited:
		return fmt.Errorf("%s %w (%v):\n%s", p.Name, errExitedDuringStart, p.exitErr, p.Log())
	case !ready:
		return fmt.Errorf("%s not ready after %v", p.Name, timeout)
	}
	return nil
}

// PodOptions says how to run a pod: a runtime process serving the sim
// executor with its API and its control API on loopback.
type PodOptions struct {
	// Options.Args follow the pod's own flags (executor, addresses,
	// control token, pod name, log level), so they can add to them or
	// override them (--executor cpu serves the built-in tiny model).
	Options
	// ControlToken is the control API's bearer token, written to the
	// --control-token-file the pod reads.
	ControlToken string
	// ReadyTimeout is how long StartPod waits for /ready; 0 is
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Pod is a runtime process serving the sim executor, or the one its Args
// name.
type Pod struct {
	*Process
	// API is the address of the OpenAI API (and /ready, /metrics), which
	// the pod also advertises to the controller.
	API string
	// Control is the address of the control API.
	Control string
}

// StartPod starts a pod on two free loopback addresses and waits until it
// is ready. FreeAddr's addresses are free when it returns, not when the
// pod binds them (another process of a parallel test run may take one in
// between), so a pod that exits at start because an address is in use is
// started again on new ones, up to startAttempts times.
func StartPod(t testing.TB, o PodOptions) *Pod {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "control-token")
	// With the newline a file written by hand or by `echo` has: the
	// runtime trims it.
	if err := os.WriteFile(tokenFile, []byte(o.ControlToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := o.ReadyTimeout
	if ready == 0 {
		ready = DefaultReadyTimeout
	}
	for attempt := 1; ; attempt++ {
		p := &Pod{API: podAddr(t), Control: podAddr(t)}
		_, apiPort, _ := net.SplitHostPort(p.API)
		_, ctlPort, _ := net.SplitHostPort(p.Control)
		run := o.Options
		run.Args = append([]string{"--executor", "sim", "--host", "127.0.0.1", "--port", apiPort,
			"--control-port", ctlPort, "--control-token-file", tokenFile, "--advertise-addr", p.API,
			"--pod-name", o.Name, "--log-level", "info"}, o.Args...)
		p.Process = Start(t, run)
		err := p.waitReady(p.API, ready)
		if err == nil {
			return p
		}
		if attempt == startAttempts || !errors.Is(err, errExitedDuringStart) || !strings.Contains(p.Log(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("%s: an address was taken before the pod bound it; starting it again on others", o.Name)
	}
}

// startAttempts bounds StartPod's starts.
const startAttempts = 3

// podAddr is where StartPod takes its addresses (a test takes some).
var podAddr = FreeAddr

// logBuffer is a bytes.Buffer that the process's output goroutine writes
// while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

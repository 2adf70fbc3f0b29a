package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a child process whose output goes to a log file. It runs in a
// process group of its own, so a terminal's Ctrl-C reaches only the parent,
// which then stops its children in order.
type Process struct {
	Name    string
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartProcess starts bin with args and env (added to the parent's
// environment), writing its output to logDir/name.log.
func StartProcess(name, logDir, bin string, args, env []string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error once Exited is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it. It returns once the process is gone.
func (p *Process) Stop(grace time.Duration) {
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Signal sends sig to the process, if it still runs.
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.exited:
	default:
		// It may exit between the check and the signal: nothing to do then.
		_ = p.cmd.Process.Signal(sig)
	}
}

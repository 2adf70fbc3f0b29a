package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Timing of a pod worker. Restarts back off from 1 s to 30 s (a kubelet's
// 10 s to 5 min would make tests wait); the backoff resets after a
// container has run for 60 s.
const (
	workerTick       = 250 * time.Millisecond
	restartBackoff   = time.Second
	maxRestart       = 30 * time.Second
	backoffReset     = 60 * time.Second
	shutdownGrace    = 10 * time.Second
	defaultGrace     = 30 * time.Second
	fastProbePeriod  = 500 * time.Millisecond
	waitingRetryTime = time.Second
)

// podWorker runs one pod: its goroutine (run) owns every field but the
// mailbox (mu, latest, removedFlag, stopping).
type podWorker struct {
	a   *Agent
	log *slog.Logger
	dir string

	mu          sync.Mutex
	latest      *corev1.Pod
	removedFlag bool
	stopping    bool
	wake        chan struct{}
	done        chan struct{} // closed when run returns

	pod        *corev1.Pod
	ip         string
	containers []*container
	probes     chan probeResult
	written    *corev1.PodStatus
	startTime  metav1.Time
}

// container is one container's process and what the agent knows about it.
type container struct {
	spec   *corev1.Container
	status corev1.ContainerStatus

	cmd      *exec.Cmd
	exited   chan struct{}
	exitCode int
	started  time.Time

	// retryAt is when to try to start it again.
	retryAt time.Time
	backoff time.Duration
	done    bool // finished for good (restart policy)

	startupOK                        bool
	readyOK, readyFails, liveFails   int
	nextReady, nextLive, nextStartup time.Time
	inFlight                         map[probeKind]bool
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		a:      a,
		log:    a.log.With("pod", pod.Namespace+"/"+pod.Name),
		dir:    a.podDir(pod),
		latest: pod,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		probes: make(chan probeResult, 16),
	}
	return w
}

// update hands the worker a newer version of its pod.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	w.poke()
}

// removed tells the worker its pod is gone from the API server.
func (w *podWorker) removed() {
	w.mu.Lock()
	w.removedFlag = true
	w.mu.Unlock()
	w.poke()
}

// shutdown tells the worker the agent stops.
func (w *podWorker) shutdown() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.poke()
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) mailbox() (pod *corev1.Pod, removed, stopping bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest, w.removedFlag, w.stopping
}

// run is the pod's life: get an address, run the containers (restarting
// them per the restart policy, probing them, reporting status) until the
// pod is deleted, then stop them and let the API server forget the pod.
func (w *podWorker) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer close(w.done)
	w.pod, _, _ = w.mailbox()
	w.startTime = metav1.Now()
	for i := range w.pod.Spec.Containers {
		c := &w.pod.Spec.Containers[i]
		w.containers = append(w.containers, &container{
			spec:     c,
			backoff:  restartBackoff,
			inFlight: map[probeKind]bool{},
			status: corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "local://" + c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			},
		})
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		w.log.Error("pod directory", "err", err)
	}
	defer func() {
		if w.ip != "" {
			w.a.opts.PodIPs.Release(w.ip)
		}
		_ = os.RemoveAll(filepath.Join(w.dir, "volumes"))
	}()

	tick := time.NewTicker(workerTick)
	defer tick.Stop()
	for {
		pod, removed, stopping := w.mailbox()
		w.pod = pod
		switch {
		case stopping:
			w.terminate(min(w.grace(), shutdownGrace), nil)
			return
		case removed:
			w.terminate(w.grace(), nil)
			return
		case pod.DeletionTimestamp != nil:
			w.terminate(w.grace(), func() { w.writeStatus(ctx) })
			w.writeStatus(ctx)
			w.forget(ctx)
			return
		}
		w.step(ctx)
		w.writeStatus(ctx)
		select {
		case <-w.wake:
		case <-tick.C:
		case r := <-w.probes:
			w.probed(r)
		}
	}
}

// step starts, restarts and probes the containers.
func (w *podWorker) step(ctx context.Context) {
	now := time.Now()
	if w.ip == "" {
		ip, err := w.a.opts.PodIPs.Allocate(w.ports())
		if err != nil {
			for _, c := range w.containers {
				c.status.State = waiting("ContainerCreating", err.Error())
			}
			return
		}
		w.ip = ip
		w.log.Info("pod IP", "ip", ip)
	}
	for _, c := range w.containers {
		if c.cmd != nil {
			select {
			case <-c.exited:
				w.exited(c, now)
			default:
				w.probe(c, now)
				continue
			}
		}
		if c.done || now.Before(c.retryAt) {
			continue
		}
		if err := w.start(ctx, c); err != nil {
			reason := "CreateContainerConfigError"
			var we errWaiting
			if errors.As(err, &we) {
				reason = "ContainerCreating"
			}
			if old := c.status.State.Waiting; old == nil || old.Message != err.Error() {
				w.log.Info("container not started", "container", c.spec.Name, "reason", reason, "err", err)
			}
			c.status.State = waiting(reason, err.Error())
			c.retryAt = now.Add(waitingRetryTime)
		}
	}
}

func (w *podWorker) ports() []int32 {
	var ports []int32
	for _, c := range w.containers {
		for _, p := range c.spec.Ports {
			ports = append(ports, p.ContainerPort)
		}
	}
	return ports
}

// start runs a container's process.
func (w *podWorker) start(ctx context.Context, c *container) error {
	bin, cmdArgs, err := w.a.binary(c.spec)
	if err != nil {
		return err
	}
	mounts, err := w.a.prepareVolumes(ctx, w.pod, c.spec, w.dir)
	if err != nil {
		return err
	}
	env, err := w.a.containerEnv(ctx, w.pod, c.spec, w.ip, mounts)
	if err != nil {
		return err
	}
	vars := map[string]string{}
	for _, kv := range env {
		for i := range kv {
			if kv[i] == '=' {
				vars[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	args := make([]string, 0, len(cmdArgs)+len(c.spec.Args)+1)
	for _, s := range append(append([]string(nil), cmdArgs...), c.spec.Args...) {
		args = append(args, rewritePaths(expand(s, vars), mounts))
	}
	if w.a.opts.HostFlag != "" {
		// The last occurrence of a flag wins, so this overrides the pod's.
		args = append(args, w.a.opts.HostFlag+"="+w.ip)
	}
	tmp := filepath.Join(w.dir, "tmp")
	for _, m := range mounts {
		if m.containerPath == "/tmp" {
			tmp = m.localPath
		}
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	base := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.dir, "TMPDIR=" + tmp, "HOSTNAME=" + w.pod.Name}

	logPath := filepath.Join(w.dir, c.spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "--- %s start %d: %s %q\n", time.Now().Format(time.RFC3339), c.status.RestartCount, bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(base, env...)
	cmd.Dir = w.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so signals reach its children too; killed if
	// the agent dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	c.cmd, c.exited, c.started = cmd, exited, time.Now()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		c.exitCode = exitCode(err)
		close(exited)
		w.poke()
	}()
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.started)}}
	c.status.ContainerID = "local://" + strconv.Itoa(cmd.Process.Pid)
	c.status.Started = ptr.To(true)
	c.status.Ready = false
	c.startupOK = c.spec.StartupProbe == nil
	c.readyOK, c.readyFails, c.liveFails = 0, 0, 0
	c.nextReady, c.nextLive, c.nextStartup = c.started, c.started, c.started
	w.log.Info("container started", "container", c.spec.Name, "pid", cmd.Process.Pid, "ip", w.ip)
	return nil
}

// exited records a container's exit and decides whether it restarts.
func (w *podWorker) exited(c *container, now time.Time) {
	term := &corev1.ContainerStateTerminated{
		ExitCode: int32(c.exitCode), StartedAt: metav1.NewTime(c.started), FinishedAt: metav1.NewTime(now),
		ContainerID: c.status.ContainerID, Reason: "Completed",
	}
	if c.exitCode != 0 {
		term.Reason = "Error"
	}
	w.log.Info("container exited", "container", c.spec.Name, "code", c.exitCode, "restarts", c.status.RestartCount)
	c.cmd = nil
	c.status.Ready = false
	c.status.Started = ptr.To(false)
	c.status.LastTerminationState = corev1.ContainerState{Terminated: term}
	policy := w.pod.Spec.RestartPolicy
	if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && c.exitCode == 0) {
		c.done = true
		c.status.State = corev1.ContainerState{Terminated: term}
		return
	}
	if now.Sub(c.started) >= backoffReset {
		c.backoff = restartBackoff
	}
	c.retryAt = now.Add(c.backoff)
	c.status.RestartCount++
	c.status.State = waiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container %s", c.backoff, c.spec.Name))
	c.backoff = min(2*c.backoff, maxRestart)
}

// kill stops a container's process group: SIGTERM, then SIGKILL once grace
// has passed.
func (c *container) signal(sig syscall.Signal) {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// terminate stops every container within grace. progress, if set, runs
// once the containers have been asked to stop (to report them not ready).
func (w *podWorker) terminate(grace time.Duration, progress func()) {
	running := false
	for _, c := range w.containers {
		if c.cmd != nil {
			running = true
			c.signal(syscall.SIGTERM)
			c.status.Ready = false
		}
	}
	if !running {
		return
	}
	w.log.Info("stopping containers", "grace", grace)
	if progress != nil {
		progress()
	}
	deadline := time.After(grace)
	for _, c := range w.containers {
		if c.cmd == nil {
			continue
		}
		select {
		case <-c.exited:
		case <-deadline:
			for _, c := range w.containers {
				c.signal(syscall.SIGKILL)
			}
			<-c.exited
		}
		now := time.Now()
		c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(c.exitCode), Reason: "Completed", StartedAt: metav1.NewTime(c.started), FinishedAt: metav1.NewTime(now),
			ContainerID: c.status.ContainerID,
		}}
		if c.exitCode != 0 {
			c.status.State.Terminated.Reason = "Error"
		}
		c.status.Started = ptr.To(false)
		c.cmd = nil
	}
}

// grace is the pod's termination grace period: the deletion's, else the
// spec's.
func (w *podWorker) grace() time.Duration {
	if s := w.pod.DeletionGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	if s := w.pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return defaultGrace
}

// forget deletes a terminated pod for good, as a kubelet does once its
// containers have stopped.
func (w *podWorker) forget(ctx context.Context) {
	err := w.a.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &w.pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log.Error("delete terminated pod", "err", err)
	}
}

// writeStatus reports the pod's status when it changed.
func (w *podWorker) writeStatus(ctx context.Context) {
	status := w.status()
	if w.written != nil && equality.Semantic.DeepEqual(&status, w.written) {
		return
	}
	pod := w.pod.DeepCopy()
	for attempt := 0; ; attempt++ {
		mergeStatus(&pod.Status, &status)
		_, err := w.a.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			w.written = &status
			return
		}
		if apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			w.log.Error("update pod status", "err", err)
			return
		}
		if pod, err = w.a.client.CoreV1().Pods(w.pod.Namespace).Get(ctx, w.pod.Name, metav1.GetOptions{}); err != nil {
			return
		}
	}
}

// status is what the agent owns of the pod's status.
func (w *podWorker) status() corev1.PodStatus {
	s := corev1.PodStatus{Phase: corev1.PodPending, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}, StartTime: &w.startTime}
	if w.ip != "" {
		s.PodIP, s.PodIPs = w.ip, []corev1.PodIP{{IP: w.ip}}
	}
	allReady, anyStarted, allDone, anyFailed := true, false, true, false
	for _, c := range w.containers {
		st := c.status
		s.ContainerStatuses = append(s.ContainerStatuses, st)
		allReady = allReady && st.Ready
		anyStarted = anyStarted || st.ContainerID != ""
		allDone = allDone && c.done
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			anyFailed = true
		}
	}
	switch {
	case allDone && anyFailed:
		s.Phase = corev1.PodFailed
	case allDone:
		s.Phase = corev1.PodSucceeded
	case anyStarted:
		s.Phase = corev1.PodRunning
	}
	boolCond := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	ready := allReady && s.Phase == corev1.PodRunning
	s.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: boolCond(w.ip != "")},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: boolCond(ready)},
		{Type: corev1.PodReady, Status: boolCond(ready)},
	}
	return s
}

// mergeStatus writes the agent's fields of want into s, keeping the rest
// (PodScheduled, QOS class) and the conditions' transition times.
func mergeStatus(s, want *corev1.PodStatus) {
	s.Phase = want.Phase
	s.HostIP, s.HostIPs = want.HostIP, want.HostIPs
	s.PodIP, s.PodIPs = want.PodIP, want.PodIPs
	s.StartTime = want.StartTime
	s.ContainerStatuses = want.ContainerStatuses
	for _, c := range want.Conditions {
		setPodCondition(s, c)
	}
}

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

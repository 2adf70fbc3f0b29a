package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/fleet"
	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
)

// Defaults of FleetLoop.
const (
	defaultPoolResync       = time.Second
	defaultStatusInterval   = 10 * time.Second
	defaultCostInterval     = 30 * time.Second
	defaultControlTimeout   = 2 * time.Second
	controlSecretMissingMsg = "control Secret not found yet; waiting for the InferencePool controller to create it"
)

// FleetLoop is the leader's program-level control loop. Every pool gets a
// worker of its own that, on the pool's policy interval, reads its pods'
// state over the control API, places programs (fleet.Fleet), pushes the
// placements, and records the result in the pool's status.capacity, in
// Prometheus and in each pod's pod-deletion-cost.
//
// It keeps nothing that the pods do not report again: a new leader starts
// with empty workers, and the fleet package continues the pods' placement
// version, so a restart or a leader change loses no program.
type FleetLoop struct {
	// Client reads pools, policies and pods from the manager's cache and
	// writes status and annotations.
	Client client.Client
	// APIReader reads the control Secrets from the API server: the
	// manager does not cache Secrets.
	APIReader client.Reader
	// Log is the loop's logger.
	Log logr.Logger
	// Addresses maps a pod to its API and control addresses; nil means
	// PodIPAddresses. Tests serve pods' control APIs on loopback with it.
	Addresses PodAddresses
	// Clock is the time rounds decide at; nil means the wall clock.
	Clock clock.Clock
	// Resync is how often the pools are listed to start and stop workers.
	Resync time.Duration
	// StatusInterval is the least time between two writes of a pool's
	// status.capacity that only change token counts.
	StatusInterval time.Duration
	// CostInterval is the least time between two rounds of changed
	// pod-deletion-cost annotations of a pool.
	CostInterval time.Duration
	// ControlTimeout bounds each control-API call to a pod.
	ControlTimeout time.Duration
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=inferencepools/status,verbs=get;patch
// +kubebuilder:rbac:groups=serving.kvpilot.dev,resources=schedulerpolicies,verbs=get;list;watch

var (
	_ manager.Runnable               = (*FleetLoop)(nil)
	_ manager.LeaderElectionRunnable = (*FleetLoop)(nil)
)

// NeedLeaderElection is true: two loops placing the same programs would
// fight over every pod.
func (l *FleetLoop) NeedLeaderElection() bool { return true }

// Start runs the loop until ctx ends. Each step:
//  1. list the pools from the cache;
//  2. start a worker for each pool that has none;
//  3. stop the worker of each pool that is gone or being deleted (which
//     also removes its metrics).
func (l *FleetLoop) Start(ctx context.Context) error {
	l.defaults()
	workers := map[types.NamespacedName]*poolWorker{}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	tick := time.NewTicker(l.Resync)
	defer tick.Stop()
	l.Log.Info("starting fleet loop")
	for {
		if err := l.syncWorkers(ctx, workers); err != nil {
			l.Log.Error(err, "list pools")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (l *FleetLoop) defaults() {
	if l.Addresses == nil {
		l.Addresses = PodIPAddresses
	}
	if l.Clock == nil {
		l.Clock = clock.Real{}
	}
	if l.Resync <= 0 {
		l.Resync = defaultPoolResync
	}
	if l.StatusInterval <= 0 {
		l.StatusInterval = defaultStatusInterval
	}
	if l.CostInterval <= 0 {
		l.CostInterval = defaultCostInterval
	}
	if l.ControlTimeout <= 0 {
		l.ControlTimeout = defaultControlTimeout
	}
}

func (l *FleetLoop) syncWorkers(ctx context.Context, workers map[types.NamespacedName]*poolWorker) error {
	pools := &servingv1alpha1.InferencePoolList{}
	if err := l.Client.List(ctx, pools); err != nil {
		return err
	}
	live := make(map[types.NamespacedName]bool, len(pools.Items))
	for i := range pools.Items {
		pool := &pools.Items[i]
		if !pool.DeletionTimestamp.IsZero() {
			continue
		}
		key := client.ObjectKeyFromObject(pool)
		live[key] = true
		if w := workers[key]; w == nil || w.exited() {
			if w != nil {
				w.stop() // releases its context
			}
			workers[key] = l.startWorker(ctx, key)
		}
	}
	for key, w := range workers {
		if !live[key] {
			// Wait for it, so its metrics are gone before a pool of the
			// same name gets a new worker.
			w.stop()
			delete(workers, key)
		}
	}
	return nil
}

func (l *FleetLoop) startWorker(ctx context.Context, key types.NamespacedName) *poolWorker {
	ctx, cancel := context.WithCancel(ctx)
	log := l.Log.WithValues("inferencePool", key)
	w := &poolWorker{
		loop:    l,
		key:     key,
		log:     log,
		metrics: newPoolMetrics(key.Namespace, key.Name),
		control: controlclient.New("", l.ControlTimeout),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go w.run(ctx)
	return w
}

// poolWorker runs one pool's rounds. Only its own goroutine touches its
// fields (but cancel and done).
type poolWorker struct {
	loop    *FleetLoop
	key     types.NamespacedName
	log     logr.Logger
	metrics *poolMetrics
	// control carries the pool's token, read once from its Secret and again
	// after a pod refused it (the Secret may have been recreated).
	control *controlclient.Client
	fleet   *fleet.Fleet

	lastStatusWrite, lastCostWrite time.Time

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

func (w *poolWorker) stop() {
	w.stopOnce.Do(w.cancel)
	<-w.done
}

func (w *poolWorker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *poolWorker) run(ctx context.Context) {
	defer close(w.done)
	defer w.metrics.forget()
	for {
		start := time.Now()
		interval, err := w.round(ctx)
		switch {
		case errors.Is(err, errPoolGone):
			return
		case err != nil && ctx.Err() == nil:
			w.log.Error(err, "fleet round")
		}
		t := time.NewTimer(max(interval-time.Since(start), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

var errPoolGone = errors.New("pool is gone")

// round runs one round of the pool and returns the interval to the next:
//  1. read the pool and its policy from the cache;
//  2. list its pods; with none there is nothing to ask;
//  3. make sure the pool's token is known;
//  4. run the fleet round (read, decide, push);
//  5. record it: metrics, status.capacity, pod-deletion-cost.
func (w *poolWorker) round(ctx context.Context) (time.Duration, error) {
	c := w.loop.Client
	pool := &servingv1alpha1.InferencePool{}
	if err := c.Get(ctx, w.key, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, errPoolGone
		}
		return defaultFleetInterval, fmt.Errorf("get pool: %w", err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return 0, errPoolGone
	}
	w.metrics.status(pool)
	policy := w.policy(ctx, pool)

	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(pool.Namespace), client.MatchingLabels(podSelector(pool.Name))); err != nil {
		return policy.interval, fmt.Errorf("list pods: %w", err)
	}
	fleetPods := fleetPods(pods.Items, w.loop.Addresses)
	if len(fleetPods) == 0 {
		// Look again soon: a pool's first pods should not wait a whole
		// interval, and an empty pool costs only a cache read.
		w.metrics.empty()
		return min(w.loop.Resync, policy.interval), w.writeCapacity(ctx, pool, nil)
	}

	if w.control.Token == "" {
		token, err := w.token(ctx, pool)
		if err != nil || token == "" {
			return policy.interval, err
		}
		w.control.Token = token
	}
	if w.fleet == nil {
		f, err := fleet.New(policy.placement, w.control, slog.New(logr.ToSlogHandler(w.log)))
		if err != nil {
			return policy.interval, fmt.Errorf("start fleet: %w", err)
		}
		w.fleet = f
	} else if err := w.fleet.SetPolicy(policy.placement); err != nil {
		return policy.interval, fmt.Errorf("set policy: %w", err)
	}

	sum, roundErr := w.fleet.Round(ctx, fleetPods, w.loop.Clock.Now())
	w.metrics.round(sum, roundErr)
	if roundErr != nil {
		// A pod that cannot be read is not fatal: the round went on
		// without it. Only a pod refusing the token makes it worth reading
		// the Secret again (it was recreated); a pod that is down or slow
		// does not.
		if controlclient.IsUnauthorized(roundErr) {
			w.control.Token = ""
		}
		roundErr = fmt.Errorf("round: %w", roundErr)
	}
	if sum == nil {
		return policy.interval, roundErr
	}
	w.log.V(1).Info("fleet round", "pods", len(fleetPods), "active", sum.ProgramsActive, "paused", sum.ProgramsPaused,
		"pauses", sum.Pauses, "marks", sum.Marks, "resumes", sum.Resumes, "moves", sum.Moves,
		"recommendedReplicas", sum.RecommendedReplicas, "version", sum.Version, "duration", sum.Duration)
	return policy.interval, errors.Join(roundErr,
		w.writeCapacity(ctx, pool, poolCapacity(sum)),
		w.writeDeletionCosts(ctx, pool.Namespace, pods.Items, sum))
}

// policy resolves the pool's SchedulerPolicy. Without one, or while it
// cannot be read or converted, the pool runs as its pods do: with the
// defaults and no program-level scheduling.
func (w *poolWorker) policy(ctx context.Context, pool *servingv1alpha1.InferencePool) fleetPolicy {
	ref := pool.Spec.SchedulerPolicyRef
	if ref == nil {
		return noPolicy()
	}
	sp := &servingv1alpha1.SchedulerPolicy{}
	if err := w.loop.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: ref.Name}, sp); err != nil {
		if !apierrors.IsNotFound(err) {
			w.log.Error(err, "get SchedulerPolicy; running with the defaults", "schedulerPolicy", ref.Name)
		}
		return noPolicy()
	}
	p, err := convertPolicy(&sp.Spec)
	if err != nil {
		w.log.Error(err, "SchedulerPolicy cannot be used; running with the defaults", "schedulerPolicy", ref.Name)
		return noPolicy()
	}
	return p
}

// token reads the pool's control token from its Secret; an empty token
// and no error mean the Secret is not there yet.
func (w *poolWorker) token(ctx context.Context, pool *servingv1alpha1.InferencePool) (string, error) {
	secret := &corev1.Secret{}
	name := ControlSecretName(pool.Name)
	if err := w.loop.APIReader.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			w.log.V(1).Info(controlSecretMissingMsg, "secret", name)
			return "", nil
		}
		return "", fmt.Errorf("get Secret %s: %w", name, err)
	}
	token := string(secret.Data[controlTokenKey])
	if token == "" {
		return "", fmt.Errorf("secret %s has no %q key", name, controlTokenKey)
	}
	return token, nil
}

func (w *poolWorker) writeCapacity(ctx context.Context, pool *servingv1alpha1.InferencePool, desired *servingv1alpha1.PoolCapacity) error {
	now := w.loop.Clock.Now()
	if !capacityWriteDue(pool.Status.Capacity, desired, w.lastStatusWrite, now, w.loop.StatusInterval) {
		return nil
	}
	if err := applyCapacity(ctx, w.loop.Client, pool, desired); err != nil {
		return err
	}
	w.lastStatusWrite = now
	return nil
}

func (w *poolWorker) writeDeletionCosts(ctx context.Context, namespace string, pods []corev1.Pod, sum *fleet.Summary) error {
	now := w.loop.Clock.Now()
	patches := costPatches(pods, deletionCosts(pods, sum), now.Sub(w.lastCostWrite) >= w.loop.CostInterval)
	if len(patches) == 0 {
		return nil
	}
	w.lastCostWrite = now
	return patchDeletionCosts(ctx, w.loop.Client, namespace, patches)
}

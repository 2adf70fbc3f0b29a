package nodeagent

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// gpuResource is the extended resource NVIDIA's device plugin advertises.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// heartbeatInterval is how often the node reports itself Ready. The
// node-lifecycle controller marks a node unknown after 50 s without one.
const heartbeatInterval = 10 * time.Second

// AgentVersion is what the node reports as its kubelet version.
const AgentVersion = "v1.36.3-kvpilot-nodeagent"

// registerNode creates the Node, or takes over one of the same name left
// by an earlier run, and reports it Ready.
func (a *Agent) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: a.node,
		Labels: map[string]string{
			corev1.LabelHostname:     a.node,
			corev1.LabelOSStable:     "linux",
			corev1.LabelArchStable:   goarch,
			"nvidia.com/gpu.product": a.opts.GPUProduct,
		},
	}}
	_, err := a.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return a.updateNodeStatus(ctx)
}

func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("node heartbeat", "err", err)
			}
		}
	}
}

func (a *Agent) updateNodeStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.client.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(250, resource.DecimalSI),
		}
		if a.opts.GPUs > 0 {
			capacity[gpuResource] = *resource.NewQuantity(int64(a.opts.GPUs), resource.DecimalSI)
		}
		node.Status.Capacity = capacity
		node.Status.Allocatable = capacity.DeepCopy()
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: a.node},
		}
		node.Status.NodeInfo = corev1.NodeSystemInfo{
			KubeletVersion:          AgentVersion,
			OperatingSystem:         "linux",
			Architecture:            goarch,
			ContainerRuntimeVersion: "local-process://" + runtime.Version(),
		}
		node.Status.Conditions = nodeConditions(node.Status.Conditions, now)
		_, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// nodeConditions reports the node Ready and free of pressure, keeping each
// condition's transition time while its status holds.
func nodeConditions(old []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	want := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kvpilot node agent is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for i := range want {
		want[i].LastHeartbeatTime = now
		want[i].LastTransitionTime = now
		for _, o := range old {
			if o.Type == want[i].Type && o.Status == want[i].Status {
				want[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	return want
}

// memTotal is the machine's memory in bytes (8 GiB when unknown).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 8 << 30
}

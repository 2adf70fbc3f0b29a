package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Manager is kvpilot's manager (cmd/manager) running as a process against
// the cluster with the admin kubeconfig, so it needs no RBAC objects.
type Manager struct {
	*Process
	// MetricsURL serves the manager's Prometheus metrics over plain HTTP.
	MetricsURL string
	// HealthURL serves /healthz and /readyz.
	HealthURL string
}

// RuntimeImage is the image the manager puts in pods. No image is pulled on
// the local node: it runs the runtime binary for the pods' command.
const RuntimeImage = "kvpilot.local/runtime:dev"

// StartManager runs the manager binary bin with leader election on (a
// restarted manager takes the lease over as a second replica would) and
// waits until it is healthy. name names its log file.
func (c *Cluster) StartManager(ctx context.Context, name, bin string, extraArgs ...string) (*Manager, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
		HealthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	args := append([]string{
		"--runtime-image=" + RuntimeImage,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]), "--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--leader-elect=true", "--leader-election-namespace=kube-system",
	}, extraArgs...)
	if m.Process, err = StartProcess(name, c.LogDir, bin, args, []string{"KUBECONFIG=" + c.Kubeconfig}); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(m.HealthURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		select {
		case <-m.Exited():
			return nil, fmt.Errorf("manager exited (%v); see %s", m.Err(), m.LogPath)
		case <-ctx.Done():
			m.Stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.Stop(5 * time.Second)
			return nil, fmt.Errorf("manager not healthy in 60 s; see %s", m.LogPath)
		}
	}
}

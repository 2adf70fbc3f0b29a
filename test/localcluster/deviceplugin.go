package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// GPUResource is the extended resource the node's device plugin advertises.
const GPUResource = "nvidia.com/gpu"

// gpuPlugin is a device plugin that advertises a fixed number of
// nvidia.com/gpu devices to the kubelet through the kubelet's real device
// plugin API (registration, ListAndWatch, Allocate). Only the devices are
// made up: there is no GPU behind them, and an allocation hands the
// container nothing but the NVIDIA_VISIBLE_DEVICES variable naming them.
// It lets GPU pools schedule on the e2e suite's real node.
type gpuPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	socket  string
	server  *grpc.Server
}

// startGPUPlugin serves the plugin on a socket in the kubelet's device
// plugin directory and registers it with the kubelet, retrying until the
// kubelet's registration socket answers or ctx ends.
func startGPUPlugin(ctx context.Context, dir string, count int) (*gpuPlugin, error) {
	p := &gpuPlugin{socket: filepath.Join(dir, "kvpilot-gpu.sock")}
	for i := range count {
		p.devices = append(p.devices, &pluginapi.Device{ID: "gpu-" + strconv.Itoa(i), Health: pluginapi.Healthy})
	}
	_ = os.Remove(p.socket)
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		return nil, fmt.Errorf("device plugin: %w", err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(l) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return nil, err
	}
	defer conn.Close()
	req := &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: GPUResource}
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, req)
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			p.stop()
			return nil, errors.Join(fmt.Errorf("device plugin: register with the kubelet"), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *gpuPlugin) stop() {
	p.server.Stop()
	_ = os.Remove(p.socket)
}

func (p *gpuPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once; they never change.
func (p *gpuPlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *gpuPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

//go:build linux

package device

import (
	"bytes"
	"fmt"

	"github.com/ebitengine/purego"
)

// nvmlReturn values we name (nvml.h).
const (
	nvmlSuccess            = 0
	nvmlNameBufferSize     = 96 // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	nvmlErrorLibraryAbsent = -1 // ours: the library could not be opened
)

// nvmlMemory is nvmlMemory_t.
type nvmlMemory struct {
	Total, Free, Used uint64
}

// nvml holds the entry points we use.
type nvml struct {
	init        func() int32
	shutdown    func() int32
	count       func(*uint32) int32
	handle      func(uint32, *uintptr) int32
	name        func(uintptr, *byte, uint32) int32
	memory      func(uintptr, *nvmlMemory) int32
	errorString func(int32) string
}

func discoverNVIDIA(lib string) ([]Device, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, nil // no NVIDIA driver on this machine
	}
	defer purego.Dlclose(h) //nolint:errcheck // nothing to do about it
	n, err := bind(h)
	if err != nil {
		return nil, fmt.Errorf("nvml %s: %w", lib, err)
	}
	if rc := n.init(); rc != nvmlSuccess {
		return nil, fmt.Errorf("nvmlInit_v2: %s", n.describe(rc))
	}
	defer n.shutdown()
	var count uint32
	if rc := n.count(&count); rc != nvmlSuccess {
		return nil, fmt.Errorf("nvmlDeviceGetCount_v2: %s", n.describe(rc))
	}
	devs := make([]Device, 0, count)
	for i := range count {
		var dev uintptr
		if rc := n.handle(i, &dev); rc != nvmlSuccess {
			return devs, fmt.Errorf("nvmlDeviceGetHandleByIndex_v2(%d): %s", i, n.describe(rc))
		}
		var buf [nvmlNameBufferSize]byte
		if rc := n.name(dev, &buf[0], uint32(len(buf))); rc != nvmlSuccess {
			return devs, fmt.Errorf("nvmlDeviceGetName(%d): %s", i, n.describe(rc))
		}
		var mem nvmlMemory
		if rc := n.memory(dev, &mem); rc != nvmlSuccess {
			return devs, fmt.Errorf("nvmlDeviceGetMemoryInfo(%d): %s", i, n.describe(rc))
		}
		name, _, _ := bytes.Cut(buf[:], []byte{0})
		devs = append(devs, Device{Index: int(i), Vendor: "nvidia", Name: string(name), MemoryBytes: mem.Total})
	}
	return devs, nil
}

// bind resolves every symbol first: purego.RegisterLibFunc panics on a
// missing one, and an old driver may lack a _v2 entry point.
func bind(h uintptr) (*nvml, error) {
	n := &nvml{}
	for _, f := range []struct {
		fptr any
		name string
	}{
		{&n.init, "nvmlInit_v2"},
		{&n.shutdown, "nvmlShutdown"},
		{&n.count, "nvmlDeviceGetCount_v2"},
		{&n.handle, "nvmlDeviceGetHandleByIndex_v2"},
		{&n.name, "nvmlDeviceGetName"},
		{&n.memory, "nvmlDeviceGetMemoryInfo"},
		{&n.errorString, "nvmlErrorString"},
	} {
		if _, err := purego.Dlsym(h, f.name); err != nil {
			return nil, fmt.Errorf("symbol %s: %w", f.name, err)
		}
		purego.RegisterLibFunc(f.fptr, h, f.name)
	}
	return n, nil
}

func (n *nvml) describe(rc int32) string {
	return fmt.Sprintf("%s (nvmlReturn %d)", n.errorString(rc), rc)
}

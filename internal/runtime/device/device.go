// Package device discovers the accelerators of the machine the runtime runs
// on, without requiring them: NVIDIA devices are found by loading NVML
// (libnvidia-ml.so.1) at run time, with no cgo dependency. A machine without
// the library simply has no devices.
package device

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Device is one accelerator.
type Device struct {
	// Index is the device's index as its driver numbers it.
	Index int `json:"index"`
	// Vendor is "nvidia".
	Vendor string `json:"vendor"`
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string `json:"name"`
	// MemoryBytes is the total device memory.
	MemoryBytes uint64 `json:"memory_bytes"`
}

// Options configure discovery.
type Options struct {
	// NVMLLibrary is the NVML shared library to load (default
	// "libnvidia-ml.so.1", found through the dynamic loader's search path).
	NVMLLibrary string
}

// DefaultNVMLLibrary is NVML's soname.
const DefaultNVMLLibrary = "libnvidia-ml.so.1"

// Discover lists the machine's accelerators. A missing NVML library is not
// an error: the list is empty. An error means the library is present but
// failed (no driver loaded, no permission); the devices found before the
// failure are returned with it.
func Discover(opts Options) ([]Device, error) {
	if opts.NVMLLibrary == "" {
		opts.NVMLLibrary = DefaultNVMLLibrary
	}
	return discoverNVIDIA(opts.NVMLLibrary)
}

// Register exports devs as gauges: kvpilot_device_info{index,name} (always
// 1) and kvpilot_device_memory_bytes{index}.
func Register(reg prometheus.Registerer, devs []Device) error {
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_device_info",
		Help: "Accelerators discovered at startup (value 1), by index and product name.",
	}, []string{"index", "name"})
	mem := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvpilot_device_memory_bytes",
		Help: "Total memory of each discovered accelerator, in bytes.",
	}, []string{"index"})
	for _, d := range devs {
		idx := strconv.Itoa(d.Index)
		info.WithLabelValues(idx, d.Name).Set(1)
		mem.WithLabelValues(idx).Set(float64(d.MemoryBytes))
	}
	for _, c := range []prometheus.Collector{info, mem} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

package device

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestDiscoverWithoutLibraryFindsNothing(t *testing.T) {
	devs, err := Discover(Options{NVMLLibrary: "libkvpilot-no-such-nvml.so.1"})
	if err != nil || len(devs) != 0 {
		t.Fatalf("Discover() = %v, %v; want no devices and no error", devs, err)
	}
}

// TestDiscoverDefault runs the real discovery: it must not fail on a machine
// without NVIDIA devices, and reports what it finds on one with them.
func TestDiscoverDefault(t *testing.T) {
	devs, err := Discover(Options{})
	if err != nil {
		t.Logf("NVML present but failed: %v", err)
	}
	for _, d := range devs {
		if d.Name == "" || d.MemoryBytes == 0 {
			t.Errorf("device %+v: want a name and memory", d)
		}
		t.Logf("device %d: %s, %d bytes", d.Index, d.Name, d.MemoryBytes)
	}
}

func TestRegisterExportsGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	devs := []Device{
		{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 85520809984},
		{Index: 1, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 85520809984},
	}
	if err := Register(reg, devs); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&sb, mf); err != nil {
			t.Fatal(err)
		}
	}
	text := sb.String()
	for _, want := range []string{
		`kvpilot_device_info{index="0",name="NVIDIA H100 80GB HBM3"} 1`,
		`kvpilot_device_info{index="1",name="NVIDIA H100 80GB HBM3"} 1`,
		`kvpilot_device_memory_bytes{index="1"} 8.5520809984e+10`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

//go:build !linux

package device

// discoverNVIDIA finds nothing: NVML discovery is implemented for Linux,
// where the runtime's pods run.
func discoverNVIDIA(string) ([]Device, error) { return nil, nil }

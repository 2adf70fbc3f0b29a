//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// hostTensorAlign is the offset alignment of tensors placed in host memory;
// ggml's CPU buffers need 32 bytes (TENSOR_ALIGNMENT), 64 keeps rows on
// cache lines.
const hostTensorAlign = 64

// hostRegion is anonymous memory mapped outside the Go heap: the kernel
// hands it out zeroed and only pages it in when touched, so a large KV
// cache costs nothing until used, and ggml may keep pointers into it.
type hostRegion struct{ mem []byte }

func newHostRegion(size int) (*hostRegion, error) {
	mem, err := syscall.Mmap(-1, 0, max(size, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("map %d MiB of host memory: %w", size>>20, err)
	}
	return &hostRegion{mem: mem}, nil
}

func (r *hostRegion) addr(off int) uintptr { return uintptr(unsafe.Pointer(&r.mem[off])) }

func (r *hostRegion) free() {
	if r != nil && r.mem != nil {
		_ = syscall.Munmap(r.mem)
		r.mem = nil
	}
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// placeHost backs the CPU backend's tensors with host memory without going
// through ggml's allocator: one buffer over a fresh zeroed region holding
// every tensor at an aligned offset. The sizes are the tensors' byte sizes.
func (e *Executor) placeHost(tensors []cTensor, sizes []int) (cBuf, *hostRegion, error) {
	total := 0
	for _, n := range sizes {
		total += alignUp(n, hostTensorAlign)
	}
	r, err := newHostRegion(total)
	if err != nil {
		return 0, nil, err
	}
	buf := e.a.cpuBufferFromPtr(r.addr(0), uintptr(len(r.mem)))
	if buf == 0 {
		r.free()
		return 0, nil, fmt.Errorf("ggml_backend_cpu_buffer_from_ptr failed")
	}
	off := 0
	for i, t := range tensors {
		if st := e.a.tensorAlloc(buf, t, r.addr(off)); st != gStatusSuccess {
			e.a.bufferFree(buf)
			r.free()
			return 0, nil, fmt.Errorf("ggml_backend_tensor_alloc: status %d", st)
		}
		off += alignUp(sizes[i], hostTensorAlign)
	}
	return buf, r, nil
}

// mapWeightsInPlace points the CPU backend's weight tensors at the model's
// file mapping: no copy, and the page cache holds the weights once however
// many processes map the file. Each tensor gets a buffer over its own bytes
// (GGUF aligns tensor data to 32 bytes, as ggml needs).
func (e *Executor) mapWeightsInPlace(ts []*model.Tensor, made map[*model.Tensor]cTensor) error {
	for _, t := range ts {
		if len(t.Data) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))
		if p%32 != 0 {
			return fmt.Errorf("tensor %s: data at %#x is not 32-byte aligned", t.Name, p)
		}
		buf := e.a.cpuBufferFromPtr(p, uintptr(len(t.Data)))
		if buf == 0 {
			return fmt.Errorf("ggml_backend_cpu_buffer_from_ptr failed for %s", t.Name)
		}
		e.mappedBufs = append(e.mappedBufs, buf)
		if st := e.a.tensorAlloc(buf, made[t], p); st != gStatusSuccess {
			return fmt.Errorf("ggml_backend_tensor_alloc %s: status %d", t.Name, st)
		}
	}
	return nil
}

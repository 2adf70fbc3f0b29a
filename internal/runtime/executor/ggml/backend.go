//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Devices the executor runs on.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// backend is one initialised ggml backend (a CPU thread pool or a CUDA
// stream) and the device it runs on.
type backend struct {
	lib *Library
	h   cBack
	dev cDev
	reg cReg
	// Name is the device as ggml names it; Variant the library file it came
	// from (for the CPU, which of the builds for x86-64 levels was chosen).
	Name, Description, Variant string
	// Threads is the CPU backend's thread count (0 on other devices), Poll
	// its pool's polling level (-1: ggml's default, the layout of its
	// parameters being unknown).
	Threads, Poll int

	pool, freePool uintptr // the CPU backend's ggml_threadpool
	// setThreadsFn is the CPU backend's ggml_backend_set_n_threads.
	setThreadsFn uintptr
}

// setThreads makes the CPU backend's next graphs use n of its pool's
// threads (at most Threads); the others sleep.
func (b *backend) setThreads(n int) {
	purego.SyscallN(b.setThreadsFn, uintptr(b.h), uintptr(n))
}

// newBackend initialises device ("cpu" or "cuda"); threads sets the CPU
// backend's thread count (0 keeps ggml's default) and poll its pool's
// polling level; cudaGraphs leaves ggml's CUDA graphs on.
func (l *Library) newBackend(device string, threads, poll int, cudaGraphs bool) (*backend, error) {
	var path string
	switch device {
	case DeviceCPU:
		p, err := l.bestCPUVariant()
		if err != nil {
			return nil, err
		}
		path = p
	case DeviceCUDA:
		path = filepath.Join(l.Dir, "libggml-cuda.so")
		if !fileExists(path) {
			return nil, fmt.Errorf("%w: %s has no libggml-cuda.so; install the CUDA build with `hack/setup-ggml.sh cuda`", ErrLibraryMissing, l.Dir)
		}
		if err := cudaPDLOffByDefault(); err != nil {
			return nil, err
		}
		if !cudaGraphs {
			if err := cudaGraphsOffByDefault(); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("ggml device %q: want %s or %s", device, DeviceCPU, DeviceCUDA)
	}
	reg, err := l.loadBackend(path)
	if err != nil {
		return nil, err
	}
	if l.api.regDevCount(reg) == 0 {
		return nil, fmt.Errorf("ggml backend %s found no device (for CUDA: no GPU visible, or the driver is missing)", filepath.Base(path))
	}
	dev := l.api.regDevGet(reg, 0)
	want := int32(devTypeCPU)
	if device == DeviceCUDA {
		want = devTypeGPU
	}
	if t := l.api.devType(dev); t != want {
		return nil, fmt.Errorf("ggml backend %s: device type %d, want %d", filepath.Base(path), t, want)
	}
	h := l.api.devInit(dev, nil)
	if h == 0 {
		return nil, fmt.Errorf("ggml could not initialise device %s", l.api.devName(dev))
	}
	b := &backend{lib: l, h: h, dev: dev, reg: reg, Name: l.api.devName(dev), Description: l.api.devDescription(dev), Variant: filepath.Base(path)}
	if device == DeviceCPU {
		// The CPU backend exposes its thread setter through the registry
		// (ggml-backend.h, ggml_backend_set_n_threads_t); the graph plan
		// asks the pool for that many threads.
		fn := l.api.regProcAddress(reg, "ggml_backend_set_n_threads")
		if fn == 0 {
			b.free()
			return nil, fmt.Errorf("ggml CPU backend has no ggml_backend_set_n_threads")
		}
		b.setThreadsFn = fn
		purego.SyscallN(fn, uintptr(h), uintptr(max(threads, 1)))
		if err := b.attachThreadpool(path, threads, poll); err != nil {
			b.free()
			return nil, err
		}
	}
	return b, nil
}

// EnvCUDAPDL is ggml's switch for programmatic dependent launch on Hopper
// and newer GPUs: a kernel starts before the one it depends on has ended
// and waits for it inside.
const EnvCUDAPDL = "GGML_CUDA_PDL"

// cudaPDLOffByDefault turns programmatic dependent launch off unless the
// environment sets EnvCUDAPDL, before the CUDA backend reads it (at its
// first kernel launch). On an H100 with ggml 0.25.1 built by
// hack/build-ggml-cuda.sh, the runtime aborted with "an illegal
// instruction was encountered" under 128 concurrent streams in both
// benchmark runs with it on, and completed the run with it off
// (docs/benchmarks.md, "make bench-gpu"); the cause inside ggml is not
// isolated. GGML_CUDA_PDL=1 turns it back on.
func cudaPDLOffByDefault() error { return setEnvUnlessNamed(EnvCUDAPDL, "0") }

// setEnvUnlessNamed sets the environment variable name to value unless
// the environment names it already (set to anything, empty too).
func setEnvUnlessNamed(name, value string) error {
	if _, set := os.LookupEnv(name); set {
		return nil
	}
	if err := os.Setenv(name, value); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// EnvCUDADisableGraphs is ggml's switch that turns its CUDA graphs off
// (set to anything; ggml reads whether it is set, once).
const EnvCUDADisableGraphs = "GGML_CUDA_DISABLE_GRAPHS"

// cudaGraphsOffByDefault turns ggml's CUDA graphs off unless the
// environment already names EnvCUDADisableGraphs (Options.CUDAGraphs,
// --ggml-cuda-graphs, leaves them on). On an H200 with ggml 0.25.1 built
// by hack/build-llama-server-cuda.sh, with PDL off, the runtime aborted
// with "an illegal instruction was encountered" (after "CUDA graph warmup
// complete", in the stream synchronize after a graph launch) in its
// second 128-stream load for two of three models, and completed both
// with GGML_CUDA_DISABLE_GRAPHS=1; on an H100 it had aborted so with PDL
// on. llama-server, which builds its graphs its own way, ran through with
// graphs on. The cause inside ggml is not isolated (docs/benchmarks.md,
// "make bench-gpu"); even without graphs the runtime serves more tokens a
// second than llama-server with them from 1 to 128 streams.
func cudaGraphsOffByDefault() error { return setEnvUnlessNamed(EnvCUDADisableGraphs, "1") }

// Offsets in struct ggml_threadpool_params (ggml.h: bool
// cpumask[GGML_MAX_N_THREADS = 512]; int n_threads; enum
// ggml_sched_priority prio; uint32_t poll; …) and ggml's default polling
// level, which attachThreadpool checks before it writes poll.
const (
	paramsNThreads  = 512
	paramsPoll      = 520
	ggmlDefaultPoll = 50
)

// attachThreadpool gives the CPU backend a thread pool that lives as long as
// the backend. Without one, ggml's CPU backend starts and joins its threads
// on every graph computation, which costs more than a small model's decode
// step. poll is the pool's polling level between graphs (ggml's 0-100: 0
// sleeps on a condition variable until the next graph, 50, ggml's default,
// spins a while first); the barrier between a graph's nodes spins whatever
// it is.
func (b *backend) attachThreadpool(variant string, threads, poll int) error {
	if threads <= 0 {
		threads = 1
	}
	h, err := purego.Dlopen(variant, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", variant, err)
	}
	var newPool, setPool, paramsInit uintptr
	for _, x := range []struct {
		dst    *uintptr
		handle uintptr
		name   string
	}{
		{&newPool, h, "ggml_threadpool_new"},
		{&b.freePool, h, "ggml_threadpool_free"},
		{&setPool, h, "ggml_backend_cpu_set_threadpool"},
		{&paramsInit, b.lib.base, "ggml_threadpool_params_init"},
	} {
		p, err := purego.Dlsym(x.handle, x.name)
		if err != nil || p == 0 {
			return fmt.Errorf("ggml CPU backend %s: missing symbol %s", filepath.Base(variant), x.name)
		}
		*x.dst = p
	}
	// struct ggml_threadpool_params is filled by ggml_threadpool_params_init
	// through a pointer; the buffer is larger than the struct (528 bytes in
	// ggml.h). Only its poll field is changed, and only where the layout
	// is the one this binding knows (checked against what params_init
	// wrote): bool cpumask[512], int n_threads, enum prio, uint32 poll.
	params := make([]uint64, 256)
	purego.SyscallN(paramsInit, uintptr(unsafe.Pointer(&params[0])), uintptr(threads))
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&params[0])), 8*len(params))
	field := func(off int) *uint32 { return (*uint32)(unsafe.Pointer(&raw[off])) }
	b.Poll = -1
	if *field(paramsNThreads) == uint32(threads) && *field(paramsPoll) == ggmlDefaultPoll {
		*field(paramsPoll) = uint32(poll)
		b.Poll = poll
	}
	pool, _, _ := purego.SyscallN(newPool, uintptr(unsafe.Pointer(&params[0])))
	runtime.KeepAlive(params)
	if pool == 0 {
		return fmt.Errorf("ggml_threadpool_new(%d threads) failed", threads)
	}
	b.pool = pool
	purego.SyscallN(setPool, uintptr(b.h), pool)
	b.Threads = threads
	return nil
}

// memory returns the device's free and total bytes.
func (b *backend) memory() (free, total uint64) {
	var f, t uintptr
	b.lib.api.devMemory(b.dev, &f, &t)
	return uint64(f), uint64(t)
}

func (b *backend) free() {
	if b.h != 0 {
		b.lib.api.backendFree(b.h)
		b.h = 0
	}
	if b.pool != 0 {
		purego.SyscallN(b.freePool, b.pool)
		b.pool = 0
	}
}

// bestCPUVariant picks, among the CPU backend builds in the directory
// (libggml-cpu-<level>.so), the one whose ggml_backend_score is highest on
// this CPU: the same rule as ggml's own registry (ggml_backend_load_best),
// which scores each variant by the instruction sets it needs and this CPU
// has, 0 meaning it cannot run here.
func (l *Library) bestCPUVariant() (string, error) {
	if p := filepath.Join(l.Dir, "libggml-cpu.so"); fileExists(p) {
		return p, nil
	}
	paths, _ := filepath.Glob(filepath.Join(l.Dir, "libggml-cpu-*.so"))
	if len(paths) == 0 {
		return "", fmt.Errorf("%w: no libggml-cpu*.so in %s: run hack/setup-ggml.sh", ErrLibraryMissing, l.Dir)
	}
	best, bestScore := "", 0
	var tried []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", filepath.Base(p), err))
			continue
		}
		score := 0
		if fn, err := purego.Dlsym(h, "ggml_backend_score"); err == nil && fn != 0 {
			r, _, _ := purego.SyscallN(fn)
			score = int(int32(r))
		}
		_ = purego.Dlclose(h)
		if score > bestScore {
			best, bestScore = p, score
		}
	}
	if best == "" {
		return "", fmt.Errorf("no CPU backend in %s runs on this CPU (%s)", l.Dir, strings.Join(tried, "; "))
	}
	return best, nil
}

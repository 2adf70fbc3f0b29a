//go:build linux && (amd64 || arm64)

package ggml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// C handles: opaque pointers owned by ggml, never dereferenced in Go.
type (
	cCtx    uintptr // struct ggml_context *
	cTensor uintptr // struct ggml_tensor *
	cGraph  uintptr // struct ggml_cgraph *
	cBack   uintptr // ggml_backend_t
	cBuf    uintptr // ggml_backend_buffer_t
	cBuft   uintptr // ggml_backend_buffer_type_t
	cReg    uintptr // ggml_backend_reg_t
	cDev    uintptr // ggml_backend_dev_t
	cAlloc  uintptr // ggml_gallocr_t
)

// initParams is struct ggml_init_params, passed to ggml_init by value.
// purego passes structs by value on linux/amd64 and linux/arm64 (its README,
// "Supported Platforms"), which is why this package builds for those two
// only; the Go layout matches C's: two 8-byte fields and a bool padded to 24.
type initParams struct {
	MemSize   uintptr
	MemBuffer uintptr
	NoAlloc   bool
}

// ggml_type values used here (ggml.h, enum ggml_type; the same numbers as
// GGUF's tensor types).
const (
	typeF32  int32 = 0
	typeF16  int32 = 1
	typeQ8_0 int32 = 8
	typeI32  int32 = 26
	typeI64  int32 = 27
	typeBF16 int32 = 30
)

// Rope modes (ggml.h): 0 rotates adjacent pairs, GGML_ROPE_TYPE_NEOX pairs
// (i, i+n/2).
const (
	ropeNormal = 0
	ropeNeox   = 2
)

// Backend device types (ggml-backend.h, enum ggml_backend_dev_type).
const (
	devTypeCPU = 0
	devTypeGPU = 1
)

// gStatusSuccess is GGML_STATUS_SUCCESS (ggml.h, enum ggml_status).
const gStatusSuccess = 0

// api is the part of ggml's C API the executor calls, bound once per process.
type api struct {
	version func() string
	commit  func() string

	initCtx         func(initParams) cCtx
	freeCtx         func(cCtx)
	tensorOverhead  func() uintptr
	graphOverhead   func(size uintptr, grads bool) uintptr
	newTensor1d     func(cCtx, int32, int64) cTensor
	newTensor2d     func(cCtx, int32, int64, int64) cTensor
	newTensor3d     func(cCtx, int32, int64, int64, int64) cTensor
	setName         func(cTensor, string) cTensor
	setInput        func(cTensor)
	setOutput       func(cTensor)
	rowSize         func(int32, int64) uintptr
	getRows         func(cCtx, cTensor, cTensor) cTensor
	argmax          func(cCtx, cTensor) cTensor
	setRows         func(cCtx, cTensor, cTensor, cTensor) cTensor
	rmsNorm         func(cCtx, cTensor, float32) cTensor
	mul             func(cCtx, cTensor, cTensor) cTensor
	add             func(cCtx, cTensor, cTensor) cTensor
	mulMat          func(cCtx, cTensor, cTensor) cTensor
	reshape2d       func(cCtx, cTensor, int64, int64) cTensor
	reshape3d       func(cCtx, cTensor, int64, int64, int64) cTensor
	view1d          func(cCtx, cTensor, int64, uintptr) cTensor
	view2d          func(cCtx, cTensor, int64, int64, uintptr, uintptr) cTensor
	view3d          func(cCtx, cTensor, int64, int64, int64, uintptr, uintptr, uintptr) cTensor
	permute         func(cCtx, cTensor, int32, int32, int32, int32) cTensor
	transpose       func(cCtx, cTensor) cTensor
	cont            func(cCtx, cTensor) cTensor
	cont2d          func(cCtx, cTensor, int64, int64) cTensor
	cast            func(cCtx, cTensor, int32) cTensor
	softMaxExt      func(cCtx, cTensor, cTensor, float32, float32) cTensor
	swigluSplit     func(cCtx, cTensor, cTensor) cTensor
	flashAttnExt    func(ctx cCtx, q, k, v, mask cTensor, scale, maxBias, logitSoftcap float32) cTensor
	ropeExt         func(ctx cCtx, a, pos, freqFactors cTensor, nDims, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) cTensor
	newGraphCustom  func(cCtx, uintptr, bool) cGraph
	buildForward    func(cGraph, cTensor)
	quantizeChunk   func(typ int32, src unsafe.Pointer, dst unsafe.Pointer, start, nrows, nPerRow int64, imatrix unsafe.Pointer) uintptr
	quantizeReqImat func(int32) bool

	tensorSet        func(t cTensor, data unsafe.Pointer, offset, size uintptr)
	tensorGet        func(t cTensor, data unsafe.Pointer, offset, size uintptr)
	graphCompute     func(cBack, cGraph) int32
	backendFree      func(cBack)
	backendName      func(cBack) string
	defaultBuft      func(cBack) cBuft
	allocCtxTensors  func(cCtx, cBack) cBuf
	allocCtxFromBuft func(cCtx, cBuft) cBuf
	buftName         func(cBuft) string
	devSupportsOp    func(cDev, cTensor) bool
	bufferFree       func(cBuf)
	bufferSize       func(cBuf) uintptr
	bufferClear      func(cBuf, uint8)
	bufferSetUsage   func(cBuf, int32)
	cpuBufferFromPtr func(ptr uintptr, size uintptr) cBuf
	tensorAlloc      func(cBuf, cTensor, uintptr) int32
	devHostBuft      func(cDev) cBuft
	buftAlloc        func(cBuft, uintptr) cBuf
	bufferBase       func(cBuf) unsafe.Pointer
	gallocrNew       func(cBuft) cAlloc
	gallocrFree      func(cAlloc)
	gallocrAlloc     func(cAlloc, cGraph) bool
	gallocrBufSize   func(cAlloc, int32) uintptr
	backendLoad      func(path string) cReg
	regDevCount      func(cReg) uintptr
	regDevGet        func(cReg, uintptr) cDev
	regProcAddress   func(cReg, string) uintptr
	regName          func(cReg) string
	devInit          func(cDev, unsafe.Pointer) cBack
	devMemory        func(cDev, *uintptr, *uintptr)
	devType          func(cDev) int32
	devName          func(cDev) string
	devDescription   func(cDev) string

	moeAPI
	ossAPI
	recurrentAPI
	mlaAPI
}

// Library is a loaded set of ggml shared libraries.
type Library struct {
	Dir string
	// Version and Commit are ggml's own (ggml_version, ggml_commit).
	Version, Commit string
	api             api
	base, core      uintptr

	mu       sync.Mutex
	backends map[string]cReg // loaded backend libraries by file name
}

// EnvLibDir names the environment variable holding the library directory
// when no directory is passed explicitly.
const EnvLibDir = "KVPILOT_GGML_LIB"

// ErrLibraryMissing reports that the ggml libraries are not installed.
var ErrLibraryMissing = errors.New("ggml libraries not found")

var (
	libMu    sync.Mutex
	libCache = map[string]*Library{}
)

// Open loads libggml-base and libggml from dir ("" means $KVPILOT_GGML_LIB).
// A process loads a directory once; later calls return the same Library.
func Open(dir string) (*Library, error) {
	if dir == "" {
		dir = os.Getenv(EnvLibDir)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: set --ggml-lib or %s to the directory hack/setup-ggml.sh prints (run it to install them)", ErrLibraryMissing, EnvLibDir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("ggml library directory %q: %w", dir, err)
	}
	libMu.Lock()
	defer libMu.Unlock()
	if l := libCache[abs]; l != nil {
		return l, nil
	}
	l, err := open(abs)
	if err != nil {
		return nil, err
	}
	libCache[abs] = l
	return l, nil
}

func open(dir string) (*Library, error) {
	basePath := filepath.Join(dir, "libggml-base.so")
	if _, err := os.Stat(basePath); err != nil {
		return nil, fmt.Errorf("%w in %s (%v): run hack/setup-ggml.sh and pass the directory it prints", ErrLibraryMissing, dir, err)
	}
	corePath, err := coreLibrary(dir)
	if err != nil {
		return nil, err
	}
	l := &Library{Dir: dir, backends: map[string]cReg{}}
	// RTLD_GLOBAL so that the backend libraries loaded later resolve
	// libggml-base's symbols from this copy.
	if l.base, err = purego.Dlopen(basePath, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return nil, fmt.Errorf("load %s: %w", basePath, err)
	}
	if l.core, err = purego.Dlopen(corePath, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return nil, fmt.Errorf("load %s: %w", corePath, err)
	}
	if err := l.bind(); err != nil {
		return nil, fmt.Errorf("ggml in %s: %w (the libraries must be the release hack/setup-ggml.sh installs)", dir, err)
	}
	l.Version, l.Commit = l.api.version(), l.api.commit()
	return l, nil
}

// coreLibrary finds libggml (the backend registry), which node-llama-cpp
// names with its own version (libggml.v0.5.0.so) and a plain build names
// libggml.so.
func coreLibrary(dir string) (string, error) {
	if p := filepath.Join(dir, "libggml.so"); fileExists(p) {
		return p, nil
	}
	// libggml.v0.5.0.so in the CPU package, libggml.cuda.v0.5.0.so in the
	// CUDA one.
	m, _ := filepath.Glob(filepath.Join(dir, "libggml.*v*.so"))
	if len(m) == 0 {
		return "", fmt.Errorf("%w: %s has libggml-base.so but no libggml.so or libggml.*v*.so: run hack/setup-ggml.sh", ErrLibraryMissing, dir)
	}
	sort.Strings(m)
	return m[len(m)-1], nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// bind resolves every entry point, reporting all missing ones at once
// rather than panicking in purego.
func (l *Library) bind() error {
	a := &l.api
	var missing []string
	sym := func(fptr any, name string) {
		for _, h := range []uintptr{l.base, l.core} {
			if p, err := purego.Dlsym(h, name); err == nil && p != 0 {
				purego.RegisterFunc(fptr, p)
				return
			}
		}
		missing = append(missing, name)
	}
	sym(&a.version, "ggml_version")
	sym(&a.commit, "ggml_commit")
	sym(&a.initCtx, "ggml_init")
	sym(&a.freeCtx, "ggml_free")
	sym(&a.tensorOverhead, "ggml_tensor_overhead")
	sym(&a.graphOverhead, "ggml_graph_overhead_custom")
	sym(&a.newTensor1d, "ggml_new_tensor_1d")
	sym(&a.newTensor2d, "ggml_new_tensor_2d")
	sym(&a.newTensor3d, "ggml_new_tensor_3d")
	sym(&a.setName, "ggml_set_name")
	sym(&a.setInput, "ggml_set_input")
	sym(&a.setOutput, "ggml_set_output")
	sym(&a.rowSize, "ggml_row_size")
	sym(&a.getRows, "ggml_get_rows")
	sym(&a.argmax, "ggml_argmax")
	sym(&a.setRows, "ggml_set_rows")
	sym(&a.rmsNorm, "ggml_rms_norm")
	sym(&a.mul, "ggml_mul")
	sym(&a.add, "ggml_add")
	sym(&a.mulMat, "ggml_mul_mat")
	sym(&a.reshape2d, "ggml_reshape_2d")
	sym(&a.reshape3d, "ggml_reshape_3d")
	sym(&a.view1d, "ggml_view_1d")
	sym(&a.view2d, "ggml_view_2d")
	sym(&a.view3d, "ggml_view_3d")
	sym(&a.permute, "ggml_permute")
	sym(&a.transpose, "ggml_transpose")
	sym(&a.cont, "ggml_cont")
	sym(&a.cont2d, "ggml_cont_2d")
	sym(&a.cast, "ggml_cast")
	sym(&a.softMaxExt, "ggml_soft_max_ext")
	sym(&a.swigluSplit, "ggml_swiglu_split")
	sym(&a.flashAttnExt, "ggml_flash_attn_ext")
	sym(&a.ropeExt, "ggml_rope_ext")
	sym(&a.newGraphCustom, "ggml_new_graph_custom")
	sym(&a.buildForward, "ggml_build_forward_expand")
	sym(&a.quantizeChunk, "ggml_quantize_chunk")
	sym(&a.quantizeReqImat, "ggml_quantize_requires_imatrix")
	sym(&a.tensorSet, "ggml_backend_tensor_set")
	sym(&a.tensorGet, "ggml_backend_tensor_get")
	sym(&a.graphCompute, "ggml_backend_graph_compute")
	sym(&a.backendFree, "ggml_backend_free")
	sym(&a.backendName, "ggml_backend_name")
	sym(&a.defaultBuft, "ggml_backend_get_default_buffer_type")
	sym(&a.allocCtxTensors, "ggml_backend_alloc_ctx_tensors")
	sym(&a.allocCtxFromBuft, "ggml_backend_alloc_ctx_tensors_from_buft")
	sym(&a.buftName, "ggml_backend_buft_name")
	sym(&a.devSupportsOp, "ggml_backend_dev_supports_op")
	sym(&a.bufferFree, "ggml_backend_buffer_free")
	sym(&a.bufferSize, "ggml_backend_buffer_get_size")
	sym(&a.bufferClear, "ggml_backend_buffer_clear")
	sym(&a.bufferSetUsage, "ggml_backend_buffer_set_usage")
	sym(&a.cpuBufferFromPtr, "ggml_backend_cpu_buffer_from_ptr")
	sym(&a.tensorAlloc, "ggml_backend_tensor_alloc")
	sym(&a.devHostBuft, "ggml_backend_dev_host_buffer_type")
	sym(&a.buftAlloc, "ggml_backend_buft_alloc_buffer")
	sym(&a.bufferBase, "ggml_backend_buffer_get_base")
	sym(&a.gallocrNew, "ggml_gallocr_new")
	sym(&a.gallocrFree, "ggml_gallocr_free")
	sym(&a.gallocrAlloc, "ggml_gallocr_alloc_graph")
	sym(&a.gallocrBufSize, "ggml_gallocr_get_buffer_size")
	sym(&a.backendLoad, "ggml_backend_load")
	sym(&a.regDevCount, "ggml_backend_reg_dev_count")
	sym(&a.regDevGet, "ggml_backend_reg_dev_get")
	sym(&a.regProcAddress, "ggml_backend_reg_get_proc_address")
	sym(&a.regName, "ggml_backend_reg_name")
	sym(&a.devInit, "ggml_backend_dev_init")
	sym(&a.devMemory, "ggml_backend_dev_memory")
	sym(&a.devType, "ggml_backend_dev_type")
	sym(&a.devName, "ggml_backend_dev_name")
	sym(&a.devDescription, "ggml_backend_dev_description")
	a.moeAPI.bind(sym)
	a.ossAPI.bind(sym)
	a.recurrentAPI.bind(sym)
	a.mlaAPI.bind(sym)
	if len(missing) > 0 {
		return fmt.Errorf("missing symbols %s", strings.Join(missing, ", "))
	}
	return nil
}

// loadBackend registers the backend library at path once per process.
func (l *Library) loadBackend(path string) (cReg, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.backends[path]; ok {
		return r, nil
	}
	r := l.api.backendLoad(path)
	if r == 0 {
		return 0, fmt.Errorf("ggml could not load backend %s (see its log above)", path)
	}
	l.backends[path] = r
	return r, nil
}

// registerFunc binds fn, a C function pointer, to the Go function *fptr.
func registerFunc(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }

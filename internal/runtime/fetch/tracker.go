package fetch

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// Tracker holds a fetch's progress for readers on other goroutines: the
// init container serves it (ServeHTTP) for the controller to fold into
// the pool's status. The zero value is ready; Fetch updates it through
// Options.Tracker.
type Tracker struct {
	mu sync.Mutex
	p  wire.FetchProgress
	// sizes are the files' sizes (-1 unknown) and completed the bytes of
	// the files finished, so DoneBytes counts a split model as one.
	sizes     []int64
	completed int64
}

// Progress returns the fetch's state now.
func (t *Tracker) Progress() wire.FetchProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// ServeHTTP answers GET with the progress as JSON (wire.FetchProgress).
func (t *Tracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(t.Progress())
}

func (t *Tracker) phase(phase string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Phase = phase
	if t.sizes == nil {
		t.p.TotalBytes = -1
	}
}

// files starts the download of files of these sizes (-1 unknown).
func (t *Tracker) files(sizes []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sizes, t.completed = sizes, 0
	t.p = wire.FetchProgress{Phase: wire.FetchDownloading, Files: len(sizes)}
	t.total()
}

// downloading reports file i (from 0) at have bytes, of size (-1
// unknown; a server may tell it only as the transfer starts).
func (t *Tracker) downloading(i int, have, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.File = i + 1
	t.p.DoneBytes = t.completed + have
	if size >= 0 && t.sizes[i] < 0 {
		t.sizes[i] = size
		t.total()
	}
}

// finished counts file i, of size bytes, as done.
func (t *Tracker) finished(i int, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sizes[i] = size
	t.completed += size
	t.p.File, t.p.DoneBytes = i+1, t.completed
	t.total()
}

// done reports the model in the cache, of size bytes.
func (t *Tracker) done(size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Phase, t.p.DoneBytes, t.p.TotalBytes = wire.FetchDone, size, size
}

func (t *Tracker) total() {
	t.p.TotalBytes = 0
	for _, s := range t.sizes {
		if s < 0 {
			t.p.TotalBytes = -1
			return
		}
		t.p.TotalBytes += s
	}
}

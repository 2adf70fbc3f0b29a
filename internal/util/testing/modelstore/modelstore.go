// Package modelstore serves a model file over loopback HTTP for tests of
// downloads in progress: the first bytes go out at once, the rest only
// when the test says.
package modelstore

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// Held is a plain HTTPS-style store (any path, HEAD answered with the
// size) that sends the first bytes of each GET and holds the rest until
// Release.
type Held struct {
	// URL is the model's URL.
	URL     string
	srv     *httptest.Server
	release chan struct{}
	once    sync.Once
}

// Start serves data, sending its first `first` bytes at once.
func Start(data []byte, first int) *Held { return start(data, first, true) }

// StartWithoutHead is Start for a store that answers HEAD with 405, so
// the size is known only from the GET.
func StartWithoutHead(data []byte, first int) *Held { return start(data, first, false) }

func start(data []byte, first int, head bool) *Held {
	h := &Held{release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && !head {
			http.Error(w, "no HEAD", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if r.Method == http.MethodHead {
			// Not held: the client reuses the connection for the GET.
			return
		}
		w.Write(data[:first])
		w.(http.Flusher).Flush()
		select {
		case <-h.release:
			w.Write(data[first:])
		case <-r.Context().Done():
		}
	}))
	h.URL = h.srv.URL + "/m.gguf"
	return h
}

// Release sends the rest of every GET, now and later.
func (h *Held) Release() { h.once.Do(func() { close(h.release) }) }

// Close releases and stops the server.
func (h *Held) Close() {
	h.Release()
	h.srv.Close()
}

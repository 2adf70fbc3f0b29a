package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/modelstore"
)

// getProgress reads a tracker through its endpoint, as the controller does.
func getProgress(t *testing.T, url string) wire.FetchProgress {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("progress endpoint: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var p wire.FetchProgress
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrackerFollowsDownload: a store on loopback sends the first MiB of a
// 3 MiB model and holds the rest; the progress endpoint, read over HTTP
// meanwhile, says downloading 1 MiB of 3, then done with all of it; a
// second fetch of the cached model is done at once. A store that answers
// no HEAD tells the size only with the GET: the total is known by then.
func TestTrackerFollowsDownload(t *testing.T) {
	for name, start := range map[string]func([]byte, int) *modelstore.Held{"HEAD": modelstore.Start, "no HEAD": modelstore.StartWithoutHead} {
		t.Run(name, func(t *testing.T) { testTrackerFollowsDownload(t, start) })
	}
}

func testTrackerFollowsDownload(t *testing.T, start func([]byte, int) *modelstore.Held) {
	data := content("progress", 3<<20)
	store := start(data, 1<<20)
	defer store.Close()
	tracker := new(Tracker)
	endpoint := httptest.NewServer(tracker)
	defer endpoint.Close()
	if p := getProgress(t, endpoint.URL); p.Phase != "" {
		t.Errorf("before the fetch: %+v, want the zero progress", p)
	}

	opts := testOptions(t, "")
	opts.Tracker = tracker
	done := make(chan error, 1)
	go func() {
		_, err := Fetch(context.Background(), store.URL, opts)
		done <- err
	}()
	want := wire.FetchProgress{Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: 1 << 20, TotalBytes: 3 << 20}
	var got wire.FetchProgress
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = getProgress(t, endpoint.URL); got == want {
			break
		}
		if got.Phase == wire.FetchDownloading && got.DoneBytes > 1<<20 {
			t.Fatalf("progress %+v: more than the store sent", got)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("while the store holds the rest (-want +got):\n%s", diff)
	}
	store.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want = wire.FetchProgress{Phase: wire.FetchDone, File: 1, Files: 1, DoneBytes: 3 << 20, TotalBytes: 3 << 20}
	if diff := cmp.Diff(want, getProgress(t, endpoint.URL)); diff != "" {
		t.Errorf("after the fetch (-want +got):\n%s", diff)
	}

	cached := new(Tracker)
	opts.Tracker = cached
	r, err := Fetch(context.Background(), store.URL, opts)
	if err != nil || !r.Cached || !bytes.Equal(readModel(t, r), data) {
		t.Fatalf("second fetch: cached %v, err %v", r.Cached, err)
	}
	if diff := cmp.Diff(wire.FetchProgress{Phase: wire.FetchDone, DoneBytes: 3 << 20, TotalBytes: 3 << 20}, cached.Progress()); diff != "" {
		t.Errorf("a cached model (-want +got):\n%s", diff)
	}
}

// TestTrackerCountsSplitModelAsOne: a split model's parts add up, whether
// downloaded or found in the blob cache (another URL fetched them).
func TestTrackerCountsSplitModelAsOne(t *testing.T) {
	files := map[string][]byte{
		"big-00001-of-00003.gguf": content("p1", 100_000),
		"big-00002-of-00003.gguf": content("p2", 100_000),
		"big-00003-of-00003.gguf": content("p3", 50_000),
	}
	h := &hub{files: files}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	want := wire.FetchProgress{Phase: wire.FetchDone, File: 3, Files: 3, DoneBytes: 250_000, TotalBytes: 250_000}
	for _, url := range []string{"hf://acme/tiny-GGUF/big-00001-of-00003.gguf", "hf://acme/tiny-GGUF@main/big-00001-of-00003.gguf"} {
		opts.Tracker = new(Tracker)
		if _, err := Fetch(context.Background(), url, opts); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, opts.Tracker.Progress()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", url, diff)
		}
	}
	if n := h.count("GET /cdn/"); n != 3 {
		t.Errorf("%d downloads, want each part once", n)
	}
}

// TestTrackerWaitsForAnotherFetcher: while another fetcher of the same URL
// holds the cache's lock, the progress says waiting.
func TestTrackerWaitsForAnotherFetcher(t *testing.T) {
	srv := startHub(t, &hub{files: map[string][]byte{"m.gguf": content("w", 1000)}})
	opts := testOptions(t, srv.URL)
	holder := &fetcher{src: Source{URL: "hf://acme/tiny-GGUF/m.gguf"}, opts: opts, log: opts.Log, track: new(Tracker)}
	for _, d := range []string{"blobs", "refs", "partial", "locks"} {
		if err := os.MkdirAll(filepath.Join(opts.CacheDir, d), 0o775); err != nil {
			t.Fatal(err)
		}
	}
	unlock, err := holder.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts.Tracker = new(Tracker)
	done := make(chan error, 1)
	go func() {
		_, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
		done <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); opts.Tracker.Progress().Phase != wire.FetchWaiting; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			unlock()
			t.Fatalf("progress %+v while another fetcher holds the lock, want waiting", opts.Tracker.Progress())
		}
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := opts.Tracker.Progress(); p.Phase != wire.FetchDone || p.DoneBytes != 1000 {
		t.Errorf("after the lock's holder left: %+v, want done with 1000 bytes", p)
	}
}

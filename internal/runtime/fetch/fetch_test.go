package fetch

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/util/testing/modelstore"
)

// hub emulates the Hugging Face Hub's endpoints a fetch uses: the resolve
// URL (a 302 to a CDN path, with X-Linked-Etag and X-Linked-Size), the CDN
// (Range requests), and the tree listing.
type hub struct {
	t     *testing.T
	repo  string            // ORG/REPO
	files map[string][]byte // path in the repository → content
	// gated repositories answer 401 without the bearer token token.
	gated bool
	token string
	// etagOverride replaces the published SHA-256 (a corrupt store).
	etagOverride string
	// abortAfter, while above zero, makes the next CDN GET send this many
	// bytes and drop the connection, and decrements abortGETs.
	abortAfter int
	abortGETs  int
	// noRange makes the CDN ignore Range headers.
	noRange bool
	// pageSize, above zero, splits the tree listing into linked pages.
	pageSize int

	mu       sync.Mutex
	requests []string // "METHOD path range"
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Range"))
	h.mu.Unlock()
	if h.gated && r.Header.Get("Authorization") != "Bearer "+h.token {
		msg := "Access to model " + h.repo + " is restricted. You must have access to it and be authenticated to access it. Please log in."
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.Header().Set("X-Error-Message", msg)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":%q}`, msg)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/models/"+h.repo+"/tree/main"):
		var entries []map[string]any
		for p, b := range h.files {
			sum := sha256.Sum256(b)
			entries = append(entries, map[string]any{"type": "file", "path": p, "size": len(b),
				"lfs": map[string]any{"oid": hex.EncodeToString(sum[:]), "size": len(b), "pointerSize": 134}})
		}
		entries = append(entries, map[string]any{"type": "directory", "path": "docs"})
		sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
		if h.pageSize > 0 {
			// Pages linked by cursor, as the Hub's Link: <...>; rel="next".
			var from int
			fmt.Sscanf(r.URL.Query().Get("cursor"), "%d", &from)
			to := min(from+h.pageSize, len(entries))
			if to < len(entries) {
				w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?recursive=true&cursor=%d>; rel="next"`, r.Host, r.URL.Path, to))
			}
			entries = entries[from:to]
		}
		json.NewEncoder(w).Encode(entries)
	case strings.HasPrefix(r.URL.Path, "/"+h.repo+"/resolve/main/"):
		p := strings.TrimPrefix(r.URL.Path, "/"+h.repo+"/resolve/main/")
		b, ok := h.files[p]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.Header().Set("X-Error-Message", "Entry not found")
			http.Error(w, `{"error":"Entry not found"}`, http.StatusNotFound)
			return
		}
		sum := sha256.Sum256(b)
		etag := hex.EncodeToString(sum[:])
		if h.etagOverride != "" {
			etag = h.etagOverride
		}
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(b)))
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef01234567"`) // the git blob's
		http.Redirect(w, r, "/cdn/"+hex.EncodeToString(sum[:]), http.StatusFound)
	case strings.HasPrefix(r.URL.Path, "/cdn/"):
		var b []byte
		for _, c := range h.files {
			sum := sha256.Sum256(c)
			if "/cdn/"+hex.EncodeToString(sum[:]) == r.URL.Path {
				b = c
			}
		}
		modelstore.ServeBlob(w, r, b, &h.mu, &h.abortGETs, h.abortAfter, h.noRange)
	default:
		http.NotFound(w, r)
	}
}

func (h *hub) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (h *hub) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

// content is deterministic test data of n bytes.
func content(seed string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s-%d;", seed, i)
	}
	return b.Bytes()[:n]
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func startHub(t *testing.T, h *hub) *httptest.Server {
	t.Helper()
	h.t = t
	if h.repo == "" {
		h.repo = "acme/tiny-GGUF"
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func testOptions(t *testing.T, endpoint string) Options {
	return Options{
		CacheDir: t.TempDir(), HFEndpoint: endpoint, RetryDelay: time.Millisecond,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func readModel(t *testing.T, r Result) []byte {
	t.Helper()
	b, err := os.ReadFile(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchHubFileThenCache(t *testing.T) {
	data := content("weights", 3<<20+17)
	h := &hub{files: map[string][]byte{"tiny-Q4_K_M.gguf": data}}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	url := "hf://acme/tiny-GGUF/tiny-Q4_K_M.gguf"

	r, err := Fetch(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cached {
		t.Error("first fetch reported cached")
	}
	if r.Path != ModelPath(opts.CacheDir, url) {
		t.Errorf("path %s, want ModelPath's %s", r.Path, ModelPath(opts.CacheDir, url))
	}
	if !bytes.Equal(readModel(t, r), data) {
		t.Fatal("model file differs from the served content")
	}
	if want := filepath.Join(opts.CacheDir, "blobs", "sha256-"+sha(data)); len(r.Files) != 1 || r.Files[0] != want {
		t.Errorf("files %v, want [%s]", r.Files, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.Path), "tiny-Q4_K_M.gguf")); err != nil {
		t.Errorf("the ref has no link under the file's own name: %v", err)
	}
	before := len(h.log())
	r2, err := Fetch(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Cached || r2.Path != r.Path {
		t.Errorf("second fetch: cached %v path %s, want cached at %s", r2.Cached, r2.Path, r.Path)
	}
	if after := len(h.log()); after != before {
		t.Errorf("second fetch sent %d requests, want none: %v", after-before, h.log()[before:])
	}
	// Another URL naming the same content (a pinned revision) reuses the blob.
	h.mu.Lock()
	h.requests = nil
	h.mu.Unlock()
	if _, err := Fetch(context.Background(), "hf://acme/tiny-GGUF@main/tiny-Q4_K_M.gguf", opts); err != nil {
		t.Fatal(err)
	}
	if n := h.count("GET /cdn/"); n != 0 {
		t.Errorf("a second URL for the same blob downloaded it %d times", n)
	}
}

func TestFetchResumesInterruptedTransfer(t *testing.T) {
	data := content("resume", 2<<20+5)
	h := &hub{files: map[string][]byte{"m.gguf": data}, abortGETs: 1, abortAfter: 700_001}
	srv := startHub(t, h)
	r, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", testOptions(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readModel(t, r), data) {
		t.Fatal("resumed file differs")
	}
	var gets []string
	for _, l := range h.log() {
		if strings.HasPrefix(l, "GET /cdn/") {
			gets = append(gets, l)
		}
	}
	if len(gets) != 2 || !strings.HasSuffix(gets[0], " ") || !strings.HasSuffix(gets[1], " bytes=700001-") {
		t.Errorf("CDN GETs %q, want a whole one then one from byte 700001", gets)
	}
}

func TestFetchResumesAcrossRuns(t *testing.T) {
	data := content("across", 1<<20+3)
	h := &hub{files: map[string][]byte{"m.gguf": data}, abortGETs: 1, abortAfter: 1000}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	opts.Attempts = 1
	_, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), "giving up after 1 attempts (1000 of 1048579 bytes kept") {
		t.Fatalf("first run: err %v, want giving up with 1000 bytes kept", err)
	}
	r, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readModel(t, r), data) {
		t.Fatal("resumed file differs")
	}
	if n := h.count("GET /cdn/"); n != 2 {
		t.Errorf("%d CDN GETs, want 2", n)
	}
	if !strings.HasSuffix(h.log()[len(h.log())-1], "bytes=1000-") {
		t.Errorf("last request %q, want a Range from byte 1000", h.log()[len(h.log())-1])
	}
}

func TestFetchRestartsWhenServerIgnoresRange(t *testing.T) {
	data := content("norange", 300_000)
	h := &hub{files: map[string][]byte{"m.gguf": data}, abortGETs: 1, abortAfter: 1234, noRange: true}
	srv := startHub(t, h)
	r, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", testOptions(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readModel(t, r), data) {
		t.Fatal("file differs after a restart from byte 0")
	}
}

func TestFetchChecksumMismatch(t *testing.T) {
	data := content("corrupt", 50_000)
	bogus := strings.Repeat("ab", 32)
	h := &hub{files: map[string][]byte{"m.gguf": data}, etagOverride: bogus}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	_, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), bogus) || !strings.Contains(err.Error(), sha(data)) || !strings.Contains(err.Error(), "hf://acme/tiny-GGUF@main/m.gguf") {
		t.Fatalf("err %v, want a checksum mismatch naming the file, %s and %s", err, bogus, sha(data))
	}
	for _, d := range []string{"partial", "blobs"} {
		entries, _ := os.ReadDir(filepath.Join(opts.CacheDir, d))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".part") || d == "blobs" {
				t.Errorf("%s/%s left behind", d, e.Name())
			}
		}
	}
	if _, err := os.Stat(ModelPath(opts.CacheDir, "hf://acme/tiny-GGUF/m.gguf")); err == nil {
		t.Error("a ref was published for a corrupt download")
	}
}

func TestFetchHubErrors(t *testing.T) {
	data := content("gated", 100)
	for _, tc := range []struct {
		name, url, token string
		gated            bool
		want             []string
	}{
		{name: "missing file", url: "hf://acme/tiny-GGUF/nope.gguf",
			want: []string{"hf://acme/tiny-GGUF@main/nope.gguf", "404 Not Found", "no such repository, revision or file", "Entry not found"}},
		{name: "gated without token", url: "hf://acme/tiny-GGUF/m.gguf", gated: true,
			want: []string{"hf://acme/tiny-GGUF@main/m.gguf", "401 Unauthorized", "needs a Hugging Face token", "is restricted"}},
		{name: "bad token", url: "hf://acme/tiny-GGUF/m.gguf", gated: true, token: "hf_wrong",
			want: []string{"hf://acme/tiny-GGUF@main/m.gguf", "401 Unauthorized", "refused the token"}},
		{name: "gated listing without token", url: "hf://acme/tiny-GGUF:Q4_K_M", gated: true,
			want: []string{"hf://acme/tiny-GGUF:Q4_K_M", "401 Unauthorized", "needs a Hugging Face token", "is restricted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hub{files: map[string][]byte{"m.gguf": data}, gated: tc.gated, token: "hf_good"}
			srv := startHub(t, h)
			opts := testOptions(t, srv.URL)
			opts.HFToken = tc.token
			_, err := Fetch(context.Background(), tc.url, opts)
			if err == nil {
				t.Fatal("fetch succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := len(h.log()); n != 1 {
				t.Errorf("%d requests, want 1 (a refusal is not retried): %v", n, h.log())
			}
		})
	}
	t.Run("good token", func(t *testing.T) {
		h := &hub{files: map[string][]byte{"m.gguf": data}, gated: true, token: "hf_good"}
		srv := startHub(t, h)
		opts := testOptions(t, srv.URL)
		opts.HFToken = "hf_good"
		if _, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFetchQuantSelector(t *testing.T) {
	files := map[string][]byte{
		"tiny-Q4_K_M.gguf":                   content("q4km", 1000),
		"tiny-Q4_K_S.gguf":                   content("q4ks", 1000),
		"tiny-IQ4_XS.gguf":                   content("iq4xs", 1000),
		"Q8_0/tiny-Q8_0-00001-of-00002.gguf": content("q8a", 1500),
		"Q8_0/tiny-Q8_0-00002-of-00002.gguf": content("q8b", 700),
		"mmproj-tiny-F16.gguf":               content("mmproj", 500),
		"tiny-F16.gguf":                      content("f16", 2000),
		"README.md":                          []byte("# tiny"),
		"v2/tiny-v2-Q5_K_M.gguf":             content("v2a", 10),
		"tiny-Q5_K_M.gguf":                   content("v1a", 10),
	}
	for _, tc := range []struct {
		quant   string
		want    []string // paths fetched, in order
		wantErr []string
	}{
		{quant: "Q4_K_M", want: []string{"tiny-Q4_K_M.gguf"}},
		{quant: "q4_k_s", want: []string{"tiny-Q4_K_S.gguf"}},
		{quant: "F16", want: []string{"tiny-F16.gguf"}}, // not the mmproj
		{quant: "Q8_0", want: []string{"Q8_0/tiny-Q8_0-00001-of-00002.gguf", "Q8_0/tiny-Q8_0-00002-of-00002.gguf"}},
		{quant: "Q4_K", wantErr: []string{"no GGUF file", "names quantisation Q4_K", "tiny-Q4_K_M.gguf", "tiny-Q4_K_S.gguf", "Q8_0/tiny-Q8_0-00001-of-00002.gguf"}},
		{quant: "Q5_K_M", wantErr: []string{"ambiguous", "tiny-Q5_K_M.gguf", "v2/tiny-v2-Q5_K_M.gguf", "name the file instead"}},
	} {
		t.Run(tc.quant, func(t *testing.T) {
			h := &hub{files: files, pageSize: 3}
			srv := startHub(t, h)
			opts := testOptions(t, srv.URL)
			url := "hf://acme/tiny-GGUF:" + tc.quant
			r, err := Fetch(context.Background(), url, opts)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("fetch succeeded")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Files) != len(tc.want) {
				t.Fatalf("fetched %v, want %v", r.Files, tc.want)
			}
			for i, p := range tc.want {
				if r.Files[i] != filepath.Join(opts.CacheDir, "blobs", "sha256-"+sha(files[p])) {
					t.Errorf("file %d is %s, want %s's blob", i, r.Files[i], p)
				}
				if b, err := os.ReadFile(filepath.Join(filepath.Dir(r.Path), filepath.Base(p))); err != nil || !bytes.Equal(b, files[p]) {
					t.Errorf("ref link %s: %v or content differs", filepath.Base(p), err)
				}
			}
			if !bytes.Equal(readModel(t, r), files[tc.want[0]]) {
				t.Error("model.gguf is not the first file")
			}
			// The tree listing gave the checksums: no HEAD was needed.
			if n := h.count("HEAD "); n != 0 {
				t.Errorf("%d HEAD requests, want 0", n)
			}
			// 11 entries in pages of 3, every page read.
			if n := h.count("GET /api/models/"); n != 4 {
				t.Errorf("%d listing pages read, want 4", n)
			}
		})
	}
}

func TestFetchSplitByPath(t *testing.T) {
	files := map[string][]byte{
		"big-00001-of-00003.gguf": content("p1", 100),
		"big-00002-of-00003.gguf": content("p2", 100),
		"big-00003-of-00003.gguf": content("p3", 50),
	}
	srv := startHub(t, &hub{files: files})
	r, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/big-00001-of-00003.gguf", testOptions(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files) != 3 {
		t.Fatalf("fetched %d files, want the set of 3", len(r.Files))
	}
	for name, b := range files {
		if got, err := os.ReadFile(filepath.Join(filepath.Dir(r.Path), name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %v or content differs", name, err)
		}
	}
	if target, _ := os.Readlink(r.Path); target != "big-00001-of-00003.gguf" {
		t.Errorf("model.gguf links to %q, want the first part", target)
	}
}

func TestFetchConcurrentDownloadsOnce(t *testing.T) {
	data := content("shared", 4<<20)
	h := &hub{files: map[string][]byte{"m.gguf": data}}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	const pods = 4
	var wg sync.WaitGroup
	results := make([]Result, pods)
	errs := make([]error, pods)
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
		}()
	}
	wg.Wait()
	for i := range pods {
		if errs[i] != nil {
			t.Fatalf("fetcher %d: %v", i, errs[i])
		}
		if !bytes.Equal(readModel(t, results[i]), data) {
			t.Fatalf("fetcher %d: content differs", i)
		}
	}
	if n := h.count("GET /cdn/"); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
}

func TestFetchNoSpace(t *testing.T) {
	srv := startHub(t, &hub{files: map[string][]byte{"m.gguf": content("big", 10_000)}})
	opts := testOptions(t, srv.URL)
	opts.FreeSpace = func(string) (int64, error) { return 4096, nil }
	_, err := Fetch(context.Background(), "hf://acme/tiny-GGUF/m.gguf", opts)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "needs 10000 more bytes") || !strings.Contains(err.Error(), "4096 free") {
		t.Fatalf("err %v, want ErrNoSpace naming 10000 needed and 4096 free", err)
	}
}

// verifySigV4 recomputes a request's SigV4 signature with the store's
// access key and secret, as an S3 store does.
func verifySigV4(accessKey, secret string) func(*http.Request) error {
	return func(r *http.Request) error {
		auth := r.Header.Get("Authorization")
		cred, rest, ok := strings.Cut(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 Credential="), ", SignedHeaders=")
		signedList, sig, ok2 := strings.Cut(rest, ", Signature=")
		if !ok || !ok2 {
			return fmt.Errorf("no SigV4 Authorization header")
		}
		access, scope, _ := strings.Cut(cred, "/")
		if access != accessKey {
			return fmt.Errorf("unknown access key %s", access)
		}
		if r.Header.Get("X-Amz-Content-Sha256") != emptySHA256 {
			return fmt.Errorf("x-amz-content-sha256 missing")
		}
		signed, canonical := canonicalRequest(r.Method, r.URL.EscapedPath(), r.URL.Query(), r.Host, r.Header, emptySHA256)
		if signed != signedList {
			return fmt.Errorf("signed headers %s, recomputed %s", signedList, signed)
		}
		if want := signature(secret, r.Header.Get("X-Amz-Date"), scope, canonical); want != sig {
			return fmt.Errorf("The request signature we calculated does not match the signature you provided")
		}
		return nil
	}
}

// s3Config is a test case's store behaviour.
type s3Config struct {
	checksum, badChecksum bool
	etag                  string
	abortGETs             int
}

func TestFetchS3(t *testing.T) {
	data := content("s3", 600_000)
	key := "models/tiny q4.gguf" // a space: the path is signed as encoded
	for _, tc := range []struct {
		name     string
		store    s3Config
		secret   string
		wantErr  []string
		wantGETs int
	}{
		{name: "md5 etag", store: s3Config{}, wantGETs: 1},
		{name: "sha256 checksum with a multipart etag", store: s3Config{checksum: true, etag: "abc-3"}, wantGETs: 1},
		{name: "resume", store: s3Config{abortGETs: 1}, wantGETs: 2},
		{name: "wrong secret", store: s3Config{}, secret: "nope",
			wantErr: []string{"s3://models/" + key, "403 Forbidden", "refused the credentials"}},
		{name: "corrupt sha256 checksum", store: s3Config{checksum: true, badChecksum: true},
			wantErr: []string{"checksum mismatch", "SHA-256 " + emptySHA256, sha(data)}},
		{name: "corrupt etag", store: s3Config{etag: strings.Repeat("0", 32)},
			wantErr: []string{"checksum mismatch", "MD5 " + strings.Repeat("0", 32), func() string { m := md5.Sum(data); return hex.EncodeToString(m[:]) }()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &modelstore.S3{Checksum: tc.store.checksum, BadChecksum: tc.store.badChecksum, ETag: tc.store.etag, AbortGETs: tc.store.abortGETs,
				Objects: map[string][]byte{"models/" + key: data}, Verify: verifySigV4("minioadmin", "minio-secret")}
			srv := httptest.NewServer(st)
			defer srv.Close()
			opts := testOptions(t, "")
			secret := "minio-secret"
			if tc.secret != "" {
				secret = tc.secret
			}
			opts.S3 = S3Config{Endpoint: srv.URL, Region: "us-east-1", S3Credentials: S3Credentials{AccessKeyID: "minioadmin", SecretAccessKey: secret}}
			r, err := Fetch(context.Background(), "s3://models/"+key, opts)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("fetch succeeded")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readModel(t, r), data) {
				t.Fatal("content differs")
			}
			if gets := st.GETs(); len(gets) != tc.wantGETs {
				t.Errorf("GETs %q, want %d", gets, tc.wantGETs)
			}
		})
	}
}

func TestFetchHTTPS(t *testing.T) {
	data := content("plain", 70_000)
	var mu sync.Mutex
	aborts := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/files/m.gguf" {
			http.NotFound(w, r)
			return
		}
		modelstore.ServeBlob(w, r, data, &mu, &aborts, 5000, false)
	}))
	defer srv.Close()
	opts := testOptions(t, "")
	r, err := Fetch(context.Background(), srv.URL+"/files/m.gguf", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readModel(t, r), data) {
		t.Fatal("content differs")
	}
	_, err = Fetch(context.Background(), srv.URL+"/files/other.gguf", opts)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/files/other.gguf: 404 Not Found: no such file") {
		t.Fatalf("err %v, want a 404 naming the URL", err)
	}
}

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    Source
		wantErr string
	}{
		{url: "hf://Qwen/Qwen3-GGUF/Qwen3-Q4_K_M.gguf", want: Source{Scheme: SchemeHF, Repo: "Qwen/Qwen3-GGUF", Revision: "main", Path: "Qwen3-Q4_K_M.gguf"}},
		{url: "hf://Qwen/Qwen3-GGUF@v1.0/sub/dir/x.gguf", want: Source{Scheme: SchemeHF, Repo: "Qwen/Qwen3-GGUF", Revision: "v1.0", Path: "sub/dir/x.gguf"}},
		{url: "hf://unsloth/Qwen3-GGUF:UD-Q4_K_XL", want: Source{Scheme: SchemeHF, Repo: "unsloth/Qwen3-GGUF", Revision: "main", Quant: "UD-Q4_K_XL"}},
		{url: "hf://unsloth/Qwen3-GGUF@abc123:Q8_0", want: Source{Scheme: SchemeHF, Repo: "unsloth/Qwen3-GGUF", Revision: "abc123", Quant: "Q8_0"}},
		{url: "s3://bucket/path/to/m.gguf", want: Source{Scheme: SchemeS3, Bucket: "bucket", Key: "path/to/m.gguf"}},
		{url: "https://example.com/m.gguf", want: Source{Scheme: SchemeHTTPS}},
		{url: "hf://Qwen/Qwen3-GGUF", wantErr: "name a file"},
		{url: "hf://Qwen/Qwen3-GGUF/../x.gguf", wantErr: "'..'"},
		{url: "hf://Qwen/Qwen3-GGUF:Q4 K", wantErr: "quantisation"},
		{url: "s3://bucket", wantErr: "s3://BUCKET/KEY"},
		{url: "s3://bucket/dir/", wantErr: "s3://BUCKET/KEY"},
		{url: "https://example.com/a/../m.gguf", wantErr: "'..'"},
		{url: "https://example.com/m.gguf?download=true", want: Source{Scheme: SchemeHTTPS}},
		{url: "ftp://x/y", wantErr: "unsupported scheme"},
		{url: "/models/x.gguf", wantErr: "want hf://"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := ParseSource(tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.URL = tc.url
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestQuantMatches(t *testing.T) {
	for _, tc := range []struct {
		path, quant string
		want        bool
	}{
		{"m-Q4_K_M.gguf", "Q4_K_M", true},
		{"m-Q4_K_M.gguf", "q4_k_m", true},
		{"m-Q4_K_M.gguf", "Q4_K", false},
		{"m-IQ4_XS.gguf", "Q4_XS", false},
		{"Q8_0/m-00001-of-00002.gguf", "Q8_0", true},
		{"m.Q5_0.gguf", "Q5_0", true},
	} {
		if got := quantMatches(tc.path, tc.quant); got != tc.want {
			t.Errorf("quantMatches(%q, %q) = %v", tc.path, tc.quant, got)
		}
	}
}

// Two URLs naming one file (a quantisation selector and its path) hold
// different locks: their partial downloads must not be one file.
func TestFetchTwoURLsOneFileConcurrently(t *testing.T) {
	data := content("twourls", 3<<20)
	h := &hub{files: map[string][]byte{"tiny-Q4_K_M.gguf": data}}
	srv := startHub(t, h)
	opts := testOptions(t, srv.URL)
	urls := []string{"hf://acme/tiny-GGUF:Q4_K_M", "hf://acme/tiny-GGUF/tiny-Q4_K_M.gguf"}
	var wg sync.WaitGroup
	results := make([]Result, len(urls))
	errs := make([]error, len(urls))
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Fetch(context.Background(), u, opts)
		}()
	}
	wg.Wait()
	for i := range urls {
		if errs[i] != nil {
			t.Fatalf("%s: %v", urls[i], errs[i])
		}
		if !bytes.Equal(readModel(t, results[i]), data) {
			t.Fatalf("%s: content differs", urls[i])
		}
	}
}

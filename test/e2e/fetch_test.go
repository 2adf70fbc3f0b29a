//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/util/testing/modelstore"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/test/localcluster"
)

// TestModelFromURL serves the built-in tiny model as a GGUF file from an
// emulated Hugging Face Hub (resolve URLs answering with X-Linked-Etag and
// a redirect to a CDN path that honours Range requests) and an emulated
// S3-compatible store (path-style, SigV4-signed requests), both host
// processes on the node's address, and checks, on pools whose
// spec.model.source.url names them:
//
//   - an hf:// pool whose first download is cut off resumes it with a
//     Range request, becomes ModelReady and answers a chat completion;
//   - an s3:// pool with credentials from a Secret does the same;
//   - a second hf:// pool of the same URL on the same cache claim finds
//     the model there: the CDN sees no further download;
//   - a file whose bytes do not match the Hub's SHA-256 leaves its pool
//     ModelReady=False with a message naming the checksum.
//
// The process node runs no init containers, so there the test is skipped.
func TestModelFromURL(t *testing.T) {
	if !env.cluster.RealNode {
		t.Skip("the process node runs no init containers: the fetch-model init container needs the real node")
	}
	gguf := tinyGGUF(t)
	hub := &fakeHub{repo: "acme/tiny-GGUF", files: map[string][]byte{
		"tiny-f32.gguf": gguf,
		// bad.gguf's resolve URL advertises the good file's SHA-256.
		"bad.gguf": corrupt(gguf),
	}, etags: map[string]string{"bad.gguf": sha256Hex(gguf)}, cutFile: "tiny-f32.gguf", cutAfter: len(gguf) / 3}
	hubURL := serveOnNode(t, hub)
	// The store checks that requests are signed with the Secret's access
	// key; internal/runtime/fetch's unit tests check the signatures.
	store := &modelstore.S3{Objects: map[string][]byte{"models/tiny-f32.gguf": gguf}, Verify: func(r *http.Request) error {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=e2e-access/") || r.Header.Get("X-Amz-Date") == "" {
			return errors.New("not signed (SigV4) with access key e2e-access")
		}
		return nil
	}}
	s3URL := serveOnNode(t, store)

	ns := newNamespace(t, "e2e-fetch")
	claim := hostPathClaim(t, ns, "model-cache")
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: s3-credentials
stringData:
  AWS_ACCESS_KEY_ID: e2e-access
  AWS_SECRET_ACCESS_KEY: e2e-secret
---
%s---
%s---
%s`,
		urlPool("hf-tiny", "hf://acme/tiny-GGUF/tiny-f32.gguf", "hfEndpoint: "+hubURL, "cache: {persistentVolumeClaim: {claimName: "+claim+"}}"),
		urlPool("s3-tiny", "s3://models/tiny-f32.gguf", fmt.Sprintf("s3: {endpoint: %s, region: us-east-1, credentialsSecretRef: {name: s3-credentials}}", s3URL)),
		urlPool("hf-bad", "hf://acme/tiny-GGUF/bad.gguf", "hfEndpoint: "+hubURL)))

	for _, pool := range []string{"hf-tiny", "s3-tiny"} {
		pod := readyPods(t, ns, pool, 1)[0]
		waitModelReady(t, ns, pool, metav1.ConditionTrue)
		chatOnce(t, pod.Status.PodIP+":8000")
	}
	if st := getPool(t, ns, "hf-tiny").Status.Model; st == nil || st.PodsFetched != 1 {
		t.Errorf("hf-tiny: status.model %+v, want podsFetched 1", st)
	}
	gets := hub.cdnGETs("tiny-f32.gguf")
	t.Logf("the Hub's CDN GETs of tiny-f32.gguf (%d bytes), by Range header: %q", len(gguf), gets)
	if len(gets) != 2 || gets[0] != "" || !strings.HasPrefix(gets[1], "bytes=") || gets[1] == "bytes=0-" {
		t.Errorf("the Hub's CDN GETs of tiny-f32.gguf (Range headers) %q: want a whole-file GET cut off, then one resuming with a Range", gets)
	}
	if gets := store.GETs(); len(gets) != 1 {
		t.Errorf("the S3 store's GETs of the object (Range headers) %q, want 1", gets)
	}

	// A second pool of the same URL on the same claim: no second download.
	applyYAML(t, ns, urlPool("hf-again", "hf://acme/tiny-GGUF/tiny-f32.gguf", "hfEndpoint: "+hubURL, "cache: {persistentVolumeClaim: {claimName: "+claim+"}}"))
	pod := readyPods(t, ns, "hf-again", 1)[0]
	waitModelReady(t, ns, "hf-again", metav1.ConditionTrue)
	chatOnce(t, pod.Status.PodIP+":8000")
	if again := hub.cdnGETs("tiny-f32.gguf"); len(again) != len(gets) {
		t.Errorf("hf-again downloaded the model again from the shared cache's URL: CDN GETs %q, before %q", again, gets)
	}

	// The corrupt file: refused, naming the checksums.
	c := waitModelReady(t, ns, "hf-bad", metav1.ConditionFalse)
	t.Logf("hf-bad: ModelReady %s %s: %s", c.Status, c.Reason, c.Message)
	if c.Reason != servingv1alpha1.ReasonModelFetchFailed || !strings.Contains(c.Message, "checksum mismatch") || !strings.Contains(c.Message, sha256Hex(gguf)) {
		t.Errorf("hf-bad: ModelReady %s %s %q, want %s naming the checksum mismatch and SHA-256 %s", c.Status, c.Reason, c.Message, servingv1alpha1.ReasonModelFetchFailed, sha256Hex(gguf))
	}
}

// urlPool is a one-pod CPU pool of the GGUF at url, fetch the lines of
// spec.model.fetch.
func urlPool(name, url string, fetch ...string) string {
	return fmt.Sprintf(`apiVersion: serving.kvpilot.dev/v1alpha1
kind: InferencePool
metadata:
  name: %s
spec:
  replicas: 1
  model:
    name: tiny
    source: {url: %q}
    fetch:
      %s
  executor: {type: CPU}
  resources: {cpu: 200m, memory: 512Mi}
  engine: {maxNumSeqs: 4, maxNumBatchedTokens: 512, kvCacheMemory: 64Mi}
`, name, url, strings.Join(fetch, "\n      "))
}

// waitModelReady waits for the pool's ModelReady condition to reach status
// and returns it; a failure's message is final once the Reason is
// ModelFetchFailed.
func waitModelReady(t *testing.T, ns, pool string, status metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	poll.UntilOK(t, podsReadyTimeout, func() string {
		p := getPool(t, ns, pool)
		got := meta.FindStatusCondition(p.Status.Conditions, servingv1alpha1.PoolModelReady)
		if got == nil {
			return pool + ": no ModelReady condition yet"
		}
		c = *got
		if c.Status != status || (status == metav1.ConditionFalse && c.Reason == servingv1alpha1.ReasonModelFetching) {
			return fmt.Sprintf("%s: ModelReady %s %s %q, want %s", pool, c.Status, c.Reason, c.Message, status)
		}
		return ""
	})
	return c
}

// chatOnce sends one chat completion to addr and fails unless it answers.
func chatOnce(t *testing.T, addr string) {
	t.Helper()
	body := `{"model":"tiny","messages":[{"role":"user","content":"Hello!"}],"max_tokens":4,"temperature":0}`
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"chat.completion"`)) {
		t.Fatalf("chat completion at %s: %d %s", addr, resp.StatusCode, b)
	}
}

// tinyGGUF is the built-in tiny model as a GGUF file.
func tinyGGUF(t *testing.T) []byte {
	t.Helper()
	m, err := model.Builtin("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := model.WriteGGUF(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// corrupt is b with one byte near its end flipped: a valid header, wrong
// weights.
func corrupt(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)-10] ^= 0xff
	return c
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// serveOnNode serves h over HTTP on the node's address, which pods reach,
// and returns its base URL.
func serveOnNode(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(localcluster.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// hostPathClaim makes a PersistentVolume on a fresh directory of the node
// (mode 0777: the pods' non-root user writes it) and a claim in ns bound
// to it, for a cache the pools' pods share, and returns the claim's name.
// The local cluster has no storage provisioner.
func hostPathClaim(t *testing.T, ns, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kvpilot-e2e-cache-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pv := ns + "-" + name
	applyYAML(t, ns, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %[2]s, name: %[3]s}
  hostPath: {path: %[4]s, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[3]s
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: %[1]s
  resources: {requests: {storage: 1Gi}}
`, pv, ns, name, dir))
	t.Cleanup(func() {
		_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{})
	})
	return name
}

// fakeHub answers the Hugging Face Hub's resolve URLs as the Hub does for
// LFS files (a 302 to a CDN path, the SHA-256 in X-Linked-Etag and the size
// in X-Linked-Size) and serves the CDN path with Range support.
type fakeHub struct {
	repo  string
	files map[string][]byte // path in the repository → content
	// etags overrides a file's advertised SHA-256 (a corrupt store).
	etags map[string]string
	// cutFile's first CDN GET sends cutAfter bytes and drops the
	// connection.
	cutFile  string
	cutAfter int

	mu   sync.Mutex
	gets map[string][]string // file → the Range header of each CDN GET
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := strings.CutPrefix(r.URL.Path, "/"+h.repo+"/resolve/main/"); ok {
		b, found := h.files[p]
		if !found {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, `{"error":"Entry not found"}`, http.StatusNotFound)
			return
		}
		etag := sha256Hex(b)
		if e, ok := h.etags[p]; ok {
			etag = e
		}
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(b)))
		http.Redirect(w, r, "/cdn/"+p, http.StatusFound)
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/cdn/")
	b, found := h.files[p]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	cuts := 0
	if r.Method == http.MethodGet {
		if h.gets == nil {
			h.gets = map[string][]string{}
		}
		h.gets[p] = append(h.gets[p], r.Header.Get("Range"))
		if p == h.cutFile && len(h.gets[p]) == 1 {
			cuts = 1
		}
	}
	h.mu.Unlock()
	var mu sync.Mutex
	modelstore.ServeBlob(w, r, b, &mu, &cuts, h.cutAfter, false)
}

// cdnGETs is the Range header of each CDN GET of file so far.
func (h *fakeHub) cdnGETs(file string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.gets[file]...)
}

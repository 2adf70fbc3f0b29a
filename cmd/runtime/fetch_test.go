package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/fetch"
	"github.com/kvpilot/kvpilot/internal/util/testing/modelstore"
)

func TestRunFetch(t *testing.T) {
	data := bytes.Repeat([]byte("gguf"), 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/m.gguf" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	cache := t.TempDir()
	env := func(k string) string {
		if k == EnvName("cache-dir") {
			return cache
		}
		return ""
	}
	noop := func() {}

	var stdout, stderr bytes.Buffer
	url := srv.URL + "/m.gguf"
	if code := run(context.Background(), noop, []string{"fetch", "--url", url}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	path := strings.TrimSpace(stdout.String())
	if path != fetch.ModelPath(cache, url) {
		t.Errorf("printed %q, want %q", path, fetch.ModelPath(cache, url))
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("fetched file: %v or content differs", err)
	}
	if !strings.Contains(stderr.String(), "msg=downloaded") || !strings.Contains(stderr.String(), "percent=100.0") {
		t.Errorf("log has no progress line:\n%s", stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	code := run(context.Background(), noop, []string{"fetch", "--url", srv.URL + "/missing.gguf"}, env, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), srv.URL+"/missing.gguf: 404 Not Found") || stdout.Len() != 0 {
		t.Errorf("missing file: exit %d, stdout %q, stderr:\n%s", code, stdout.String(), stderr.String())
	}

	for _, args := range [][]string{
		{"fetch"},
		{"fetch", "--url", "ftp://x/y", "--cache-dir", cache},
		{"fetch", "--url", url, "--cache-dir", cache, "--attempts", "0"},
	} {
		stderr.Reset()
		if code := run(context.Background(), noop, args, func(string) string { return "" }, io.Discard, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
	}
}

func TestRunFetchHFTokenFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hf_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Linked-Size", "3")
		w.Write([]byte("abc"))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("hf_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"fetch", "--url", "hf://acme/repo/m.gguf", "--cache-dir", t.TempDir(), "--hf-endpoint", srv.URL, "--hf-token-file", tokenFile}
	if code := run(context.Background(), func() {}, args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	stderr.Reset()
	args = append(args[:len(args)-2], "--cache-dir", t.TempDir())
	code := run(context.Background(), func() {}, args, func(string) string { return "" }, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "401 Unauthorized") || !strings.Contains(stderr.String(), "needs a Hugging Face token") {
		t.Errorf("without the token: exit %d, stderr:\n%s", code, stderr.String())
	}
}

func TestREADMEDocumentsEveryFetchFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFetchFlagSet(&fetchOptions{}, io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(string(readme), "`--"+f.Name+"`") {
			t.Errorf("docs/api.md does not document runtime fetch's --%s", f.Name)
		}
	})
}

// TestRunFetchServesProgress: with --progress-addr, the fetch mode serves
// its download's progress while it runs (the pool's controller reads it
// from the pod's control port) and stops serving when it exits.
func TestRunFetchServesProgress(t *testing.T) {
	data := bytes.Repeat([]byte("gguf"), 1<<16)
	store := modelstore.Start(data, len(data)/4)
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var stdout, stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(context.Background(), func() {}, []string{"fetch", "--url", store.URL, "--cache-dir", t.TempDir(), "--progress-addr", addr},
			func(string) string { return "" }, &stdout, &stderr)
	}()
	want := wire.FetchProgress{Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: int64(len(data) / 4), TotalBytes: int64(len(data))}
	var got wire.FetchProgress
	for deadline := time.Now().Add(20 * time.Second); got != want && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + wire.FetchProgressPath)
		if err != nil {
			continue // not listening yet
		}
		got = wire.FetchProgress{}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
	}
	store.Release()
	if got != want {
		t.Errorf("progress %+v, want %+v", got, want)
	}
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := http.Get("http://" + addr + wire.FetchProgressPath); err == nil {
		t.Error("progress still served after the fetch mode exited")
	}
}

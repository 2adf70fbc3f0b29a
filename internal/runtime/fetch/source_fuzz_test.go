package fetch

import (
	"strings"
	"testing"
)

// FuzzParseSource: any string parses or errs without panicking, and what
// parses names a repository, bucket or host and a path that cannot climb
// out of the cache's or the store's directories.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"hf://Qwen/Qwen3-GGUF/Qwen3-Q4_K_M.gguf", "hf://a/b@rev:Q8_0", "hf://a/b:", "hf://a/b/../c",
		"s3://bucket/key.gguf", "s3:///k", "https://h/p.gguf", "http://h/", "hf://a", "://", "hf://a/b@x/y:z/w.gguf",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseSource(raw)
		if err != nil {
			return
		}
		if s.URL != raw {
			t.Fatalf("URL %q, want %q", s.URL, raw)
		}
		switch s.Scheme {
		case SchemeHF:
			if strings.Count(s.Repo, "/") != 1 || s.Revision == "" || strings.Contains(s.Revision, "/") {
				t.Fatalf("%q: repo %q revision %q", raw, s.Repo, s.Revision)
			}
			if (s.Path == "") == (s.Quant == "") {
				t.Fatalf("%q: want exactly one of path %q and quant %q", raw, s.Path, s.Quant)
			}
			if s.Path != "" && checkPath(s.Path) != nil {
				t.Fatalf("%q: path %q accepted", raw, s.Path)
			}
		case SchemeS3:
			if s.Bucket == "" || checkPath(s.Key) != nil {
				t.Fatalf("%q: bucket %q key %q", raw, s.Bucket, s.Key)
			}
		case SchemeHTTPS:
			if strings.Contains(raw, "/../") || strings.HasSuffix(raw, "/..") {
				t.Fatalf("%q: '..' accepted", raw)
			}
		default:
			t.Fatalf("%q: scheme %q", raw, s.Scheme)
		}
	})
}

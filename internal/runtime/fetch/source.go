// Package fetch brings a model named by a URL (hf://, s3://, https://) into
// a cache directory that the pods of a pool may share, so that the runtime
// binary itself, run as an init container (runtime fetch), is all a pod
// needs to get its weights: no extra image, no sidecar.
//
// The cache is content-keyed: each file is a blob named by its SHA-256
// (blobs/sha256-<hex>), verified against the checksum the store publishes
// (the Hub's X-Linked-Etag for LFS files, S3's SHA-256 checksum or
// single-part MD5 ETag) before it gets that name. refs/<key>/, where key
// hashes the URL, holds symlinks named after the fetched files and a
// model.gguf symlink to the first of them, so the path a pod loads is known
// before the fetch runs (ModelPath). Fetchers of the same URL take a file
// lock, so two pods starting at once on a shared volume download once; an
// interrupted download resumes with an HTTP Range request, in the same run
// or the next.
package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Scheme is a model URL's scheme.
type Scheme string

const (
	// SchemeHF is the Hugging Face Hub: hf://ORG/REPO[@REVISION]/PATH or
	// hf://ORG/REPO[@REVISION]:QUANT.
	SchemeHF Scheme = "hf"
	// SchemeS3 is an S3-compatible store: s3://BUCKET/KEY.
	SchemeS3 Scheme = "s3"
	// SchemeHTTPS is a plain file over https:// (or http:// for tests and
	// in-cluster mirrors).
	SchemeHTTPS Scheme = "https"
)

// Source is a parsed model URL.
type Source struct {
	// URL is the URL as given; it keys the cache's refs.
	URL    string
	Scheme Scheme
	// Hub: Repo is ORG/REPO, Revision defaults to main, and exactly one of
	// Path (a file in the repository) and Quant (a quantisation to pick
	// among the repository's GGUF files) is set.
	Repo, Revision, Path, Quant string
	// S3: Bucket and Key.
	Bucket, Key string
}

// hubRepoPart is one segment of a Hub repository id.
var hubRepoPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// quantPattern is what a quantisation selector may hold (Q4_K_M, IQ2_XXS,
// F16, BF16, UD-Q4_K_XL...).
var quantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ParseSource parses a model URL. It checks the shape only; whether the
// file exists is the fetch's business.
func ParseSource(raw string) (Source, error) {
	s := Source{URL: raw}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return s, fmt.Errorf("model URL %q: want hf://, s3:// or https://", raw)
	}
	switch scheme {
	case "hf":
		s.Scheme = SchemeHF
		return s, s.parseHub(rest)
	case "s3":
		s.Scheme = SchemeS3
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" || key == "" || strings.HasSuffix(key, "/") {
			return s, fmt.Errorf("model URL %q: want s3://BUCKET/KEY naming one object", raw)
		}
		if err := checkPath(key); err != nil {
			return s, fmt.Errorf("model URL %q: %w", raw, err)
		}
		s.Bucket, s.Key = bucket, key
		return s, nil
	case "https", "http":
		s.Scheme = SchemeHTTPS
		host, p, _ := strings.Cut(rest, "/")
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		if host == "" || p == "" || strings.HasSuffix(p, "/") {
			return s, fmt.Errorf("model URL %q: want %s://HOST/PATH naming one file", raw, scheme)
		}
		if err := checkPath(p); err != nil {
			return s, fmt.Errorf("model URL %q: %w", raw, err)
		}
		return s, nil
	default:
		return s, fmt.Errorf("model URL %q: unsupported scheme %q (want hf, s3 or https)", raw, scheme)
	}
}

func (s *Source) parseHub(rest string) error {
	org, rest, _ := strings.Cut(rest, "/")
	repo, filePath, hasPath := strings.Cut(rest, "/")
	if hasPath {
		if repo, s.Revision, _ = strings.Cut(repo, "@"); filePath == "" {
			return fmt.Errorf("model URL %q: empty file path after the repository", s.URL)
		}
		if err := checkPath(filePath); err != nil {
			return fmt.Errorf("model URL %q: %w", s.URL, err)
		}
		s.Path = filePath
	} else {
		// ORG/REPO[@REV]:QUANT, as ollama's hf.co/ORG/REPO:QUANT.
		var quant string
		repo, quant, _ = strings.Cut(repo, ":")
		repo, s.Revision, _ = strings.Cut(repo, "@")
		if quant == "" {
			return fmt.Errorf("model URL %q: name a file (hf://ORG/REPO/FILE.gguf) or a quantisation (hf://ORG/REPO:Q4_K_M)", s.URL)
		}
		if !quantPattern.MatchString(quant) {
			return fmt.Errorf("model URL %q: quantisation %q must be letters, digits, '_', '.' or '-'", s.URL, quant)
		}
		s.Quant = quant
	}
	if !hubRepoPart.MatchString(org) || !hubRepoPart.MatchString(repo) {
		return fmt.Errorf("model URL %q: want hf://ORG/REPO[@REVISION]/PATH with ORG and REPO letters, digits, '.', '_' or '-'", s.URL)
	}
	if s.Revision == "" {
		s.Revision = "main"
	} else if strings.ContainsAny(s.Revision, "/:?#") {
		return fmt.Errorf("model URL %q: revision %q must be a branch, tag or commit without '/'", s.URL, s.Revision)
	}
	s.Repo = org + "/" + repo
	return nil
}

// checkPath refuses paths that could escape a directory when joined.
func checkPath(p string) error {
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("path %q must not contain empty, '.' or '..' segments", p)
		}
	}
	return nil
}

// RefKey is the name of a URL's directory under refs/: the first 16 bytes
// of the SHA-256 of the URL as written, in hex. The controller computes it
// to know the model's path before the fetch runs.
func RefKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:16])
}

// ModelFile is the name, inside a ref directory, of the symlink to the model
// file the runtime loads (the first part of a split GGUF).
const ModelFile = "model.gguf"

// ModelPath is the file a runtime loads after fetching url into cacheDir.
// It uses path, not filepath, so the controller gets a Linux path.
func ModelPath(cacheDir, url string) string {
	return path.Join(cacheDir, "refs", RefKey(url), ModelFile)
}

func refDir(cacheDir, url string) string {
	return filepath.Join(cacheDir, "refs", RefKey(url))
}

// splitPart matches a split GGUF's part name: NAME-00001-of-00003.gguf, as
// llama.cpp's gguf-split writes them.
var splitPart = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// splitSet returns the names of every part of the split set p belongs to,
// in order, or just p when it is no split part.
func splitSet(p string) ([]string, error) {
	m := splitPart.FindStringSubmatch(p)
	if m == nil {
		return []string{p}, nil
	}
	var n int
	fmt.Sscanf(m[3], "%d", &n)
	if n < 1 || n > 999 {
		return nil, fmt.Errorf("split GGUF %q: part count %s out of range 1..999", p, m[3])
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s-%05d-of-%s.gguf", m[1], i+1, m[3])
	}
	return parts, nil
}

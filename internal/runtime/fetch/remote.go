package fetch

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// remoteFile is one file of a model to download.
type remoteFile struct {
	// name is the file's name in the ref directory (its base name).
	name string
	// display is the URL named in errors and logs.
	display string
	// size in bytes; -1 when the store does not say.
	size int64
	// sha256 (hex) and md5 (hex) the content must have; empty when the
	// store publishes none.
	sha256, md5 string
	// identity names the remote version (checksum, ETag, size) so a partial
	// download of another version is not resumed.
	identity string
	// request builds a request for the file (GET or HEAD).
	request func(ctx context.Context, method string) (*http.Request, error)
}

// HTTPError is a refusal by the store: the URL, its status and what it
// means for the user.
type HTTPError struct {
	URL    string
	Status int
	// Cause explains the status in the terms of the store.
	Cause string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Cause)
}

// permanent reports whether retrying cannot help.
func (e *HTTPError) permanent() bool {
	return e.Status < 500 && e.Status != http.StatusTooManyRequests && e.Status != http.StatusRequestTimeout
}

// statusError explains a failed response; it reads a little of the body for
// the store's own message.
func (f *fetcher) statusError(display string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	msg := storeMessage(body)
	if msg == "" {
		// A HEAD has no body; the Hub says why in headers.
		msg = resp.Header.Get("X-Error-Message")
	}
	var cause string
	switch f.src.Scheme {
	case SchemeHF:
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			if f.opts.HFToken == "" {
				cause = "the repository is gated or private and needs a Hugging Face token (hfTokenSecretRef, --hf-token-file or HF_TOKEN)"
			} else {
				cause = "the Hub refused the token: it is invalid, or its account has no access to this gated or private repository (accept its terms on the Hub)"
			}
		case http.StatusNotFound:
			cause = "no such repository, revision or file on the Hub"
		}
	case SchemeS3:
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			if f.opts.S3.AccessKeyID == "" {
				cause = "the store refused an anonymous request: give credentials (an S3 credentials Secret, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
			} else {
				cause = "the store refused the credentials: wrong key or secret, wrong region, or no s3:GetObject permission on the object"
			}
		case http.StatusNotFound:
			cause = "no such bucket or key"
		}
	default:
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			cause = "the server refused access"
		case http.StatusNotFound:
			cause = "no such file on the server"
		}
	}
	if cause == "" {
		cause = "the server failed the request"
	}
	if msg != "" {
		cause += " (" + msg + ")"
	}
	return &HTTPError{URL: display, Status: resp.StatusCode, Cause: cause}
}

var xmlMessage = regexp.MustCompile(`<(Code|Message)>([^<]{1,200})</`)

// storeMessage extracts a store's error message: the Hub's JSON "error", or
// S3's XML Code and Message.
func storeMessage(body []byte) string {
	var j struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &j) == nil && j.Error != "" {
		return j.Error
	}
	var parts []string
	for _, m := range xmlMessage.FindAllSubmatch(body, 2) {
		parts = append(parts, string(m[2]))
	}
	return strings.Join(parts, ": ")
}

// files resolves the source into the files to download, with their sizes
// and checksums.
func (f *fetcher) files(ctx context.Context) ([]remoteFile, error) {
	s := &f.src
	switch s.Scheme {
	case SchemeHF:
		if s.Quant != "" {
			return f.hubQuant(ctx)
		}
		names, err := splitSet(s.Path)
		if err != nil {
			return nil, err
		}
		out := make([]remoteFile, len(names))
		for i, p := range names {
			if out[i], err = f.hubFile(ctx, p, nil); err != nil {
				return nil, err
			}
		}
		return out, nil
	case SchemeS3:
		names, err := splitSet(s.Key)
		if err != nil {
			return nil, err
		}
		out := make([]remoteFile, len(names))
		for i, k := range names {
			if out[i], err = f.s3File(ctx, k); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		u, err := url.Parse(s.URL)
		if err != nil {
			return nil, fmt.Errorf("model URL %q: %w", s.URL, err)
		}
		names, err := splitSet(u.Path)
		if err != nil {
			return nil, err
		}
		out := make([]remoteFile, len(names))
		for i, p := range names {
			pu := *u
			pu.Path, pu.RawPath = p, ""
			if out[i], err = f.httpsFile(ctx, pu.String()); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

func (f *fetcher) hubEndpoint() string {
	if f.opts.HFEndpoint != "" {
		return strings.TrimSuffix(f.opts.HFEndpoint, "/")
	}
	return "https://huggingface.co"
}

func (f *fetcher) hubRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if f.opts.HFToken != "" {
		req.Header.Set("Authorization", "Bearer "+f.opts.HFToken)
	}
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

const userAgent = "kvpilot-runtime-fetch"

// hubFile describes one file of the Hub repository. known carries the
// size and SHA-256 the tree listing gave, sparing the HEAD request.
func (f *fetcher) hubFile(ctx context.Context, p string, known *hubEntry) (remoteFile, error) {
	s := &f.src
	u := f.hubEndpoint() + "/" + s.Repo + "/resolve/" + url.PathEscape(s.Revision) + "/" + escapePath(p)
	rf := remoteFile{
		name: path.Base(p), display: "hf://" + s.Repo + "@" + s.Revision + "/" + p, size: -1,
		request: func(ctx context.Context, method string) (*http.Request, error) { return f.hubRequest(ctx, method, u) },
	}
	if known != nil && known.LFS != nil && isHex(known.LFS.OID, 64) {
		rf.size, rf.sha256 = known.LFS.Size, strings.ToLower(known.LFS.OID)
		rf.identity = "sha256:" + rf.sha256
		return rf, nil
	}
	// The resolve URL's own answer (before its redirect to the CDN) carries
	// the LFS file's SHA-256 in X-Linked-Etag and its size in X-Linked-Size.
	req, err := f.hubRequest(ctx, http.MethodHead, u)
	if err != nil {
		return rf, err
	}
	resp, err := f.noRedirect.Do(req)
	if err != nil {
		return rf, fmt.Errorf("%s: %w", rf.display, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return rf, f.statusError(rf.display, resp)
	}
	etag := unquoteETag(resp.Header.Get("X-Linked-Etag"))
	if etag == "" {
		etag = unquoteETag(resp.Header.Get("ETag"))
	}
	if isHex(etag, 64) {
		rf.sha256 = strings.ToLower(etag)
	}
	rf.identity = "etag:" + etag
	for _, h := range []string{"X-Linked-Size", "Content-Length"} {
		if n, err := strconv.ParseInt(resp.Header.Get(h), 10, 64); err == nil && n >= 0 {
			rf.size = n
			break
		}
	}
	if resp.StatusCode >= 300 && resp.Header.Get("X-Linked-Size") == "" {
		rf.size = -1 // a redirect's Content-Length is its own body's
	}
	return rf, nil
}

// hubEntry is one entry of the Hub's tree listing.
type hubEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// maxTreePages bounds the Hub listing's pagination.
const maxTreePages = 50

// hubQuant lists the repository's GGUF files and picks the one model (a
// file or a split set) whose path names the quantisation.
func (f *fetcher) hubQuant(ctx context.Context) ([]remoteFile, error) {
	s := &f.src
	next := f.hubEndpoint() + "/api/models/" + s.Repo + "/tree/" + url.PathEscape(s.Revision) + "?recursive=true"
	var entries []hubEntry
	for page := 0; next != ""; page++ {
		if page == maxTreePages {
			return nil, fmt.Errorf("%s: the Hub's file listing has more than %d pages", s.URL, maxTreePages)
		}
		req, err := f.hubRequest(ctx, http.MethodGet, next)
		if err != nil {
			return nil, err
		}
		resp, err := f.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: list files: %w", s.URL, err)
		}
		if resp.StatusCode != http.StatusOK {
			err := f.statusError(s.URL, resp)
			resp.Body.Close()
			return nil, err
		}
		var pageEntries []hubEntry
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&pageEntries)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: the Hub's file listing: %w", s.URL, err)
		}
		entries = append(entries, pageEntries...)
		next = nextLink(resp.Header.Get("Link"))
	}
	// Group GGUF files into models: a single file, or a split set by its
	// prefix.
	models := map[string][]hubEntry{}
	var all []string
	for _, e := range entries {
		if e.Type != "file" || !strings.HasSuffix(strings.ToLower(e.Path), ".gguf") {
			continue
		}
		base := strings.ToLower(path.Base(e.Path))
		if strings.Contains(base, "mmproj") || strings.Contains(base, "imatrix") {
			continue // a vision projector or importance matrix, not the model
		}
		all = append(all, e.Path)
		key := e.Path
		if m := splitPart.FindStringSubmatch(e.Path); m != nil {
			key = m[1] + "-of-" + m[3]
		}
		if quantMatches(e.Path, s.Quant) {
			models[key] = append(models[key], e)
		}
	}
	sort.Strings(all)
	if len(models) != 1 {
		keys := make([]string, 0, len(models))
		for k := range models {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(models) == 0 {
			return nil, fmt.Errorf("%s: no GGUF file in %s@%s names quantisation %s; the repository's GGUF files: %s",
				s.URL, s.Repo, s.Revision, s.Quant, listOrNone(all))
		}
		return nil, fmt.Errorf("%s: quantisation %s is ambiguous in %s@%s, it matches %s: name the file instead (hf://%s@%s/PATH.gguf)",
			s.URL, s.Quant, s.Repo, s.Revision, strings.Join(keys, ", "), s.Repo, s.Revision)
	}
	var chosen []hubEntry
	for _, v := range models {
		chosen = v
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].Path < chosen[j].Path })
	want, err := splitSet(chosen[0].Path)
	if err != nil {
		return nil, err
	}
	if len(want) != len(chosen) {
		return nil, fmt.Errorf("%s: split GGUF %s in %s@%s is incomplete: %d of %d parts listed", s.URL, chosen[0].Path, s.Repo, s.Revision, len(chosen), len(want))
	}
	out := make([]remoteFile, len(chosen))
	for i := range chosen {
		if out[i], err = f.hubFile(ctx, chosen[i].Path, &chosen[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// quantMatches reports whether p names quant as a whole word: Q4_K matches
// model-Q4_K.gguf but not model-Q4_K_M.gguf (case-insensitive).
func quantMatches(p, quant string) bool {
	lp, lq := strings.ToLower(p), strings.ToLower(quant)
	for i := 0; ; {
		j := strings.Index(lp[i:], lq)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(lq)
		if (start == 0 || !wordByte(lp[start-1])) && (end == len(lp) || !wordByte(lp[end])) {
			return true
		}
		i = start + 1
	}
}

func wordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}

var linkNext = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

func nextLink(h string) string {
	if m := linkNext.FindStringSubmatch(h); m != nil {
		return m[1]
	}
	return ""
}

// s3File describes one object: a signed HEAD gives its size, ETag and,
// with checksum mode, its SHA-256 checksum.
func (f *fetcher) s3File(ctx context.Context, key string) (remoteFile, error) {
	s := &f.src
	c := f.opts.S3
	endpoint := c.Endpoint
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	if endpoint == "" {
		endpoint = "https://s3." + region + ".amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return remoteFile{}, fmt.Errorf("S3 endpoint %q: want a URL such as https://minio.example:9000", endpoint)
	}
	// Path-style addressing works with every S3-compatible store.
	uriEncodePath(u, strings.TrimSuffix(u.Path, "/")+"/"+s.Bucket+"/"+key)
	rf := remoteFile{name: path.Base(key), display: "s3://" + s.Bucket + "/" + key, size: -1}
	rf.request = func(ctx context.Context, method string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("User-Agent", userAgent)
		if method == http.MethodHead {
			req.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
		}
		if c.AccessKeyID != "" {
			req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			signV4(req, c.S3Credentials, region, "s3", emptySHA256, f.opts.now())
		}
		return req, nil
	}
	req, err := rf.request(ctx, http.MethodHead)
	if err != nil {
		return rf, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return rf, fmt.Errorf("%s: %w", rf.display, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return rf, f.statusError(rf.display, resp)
	}
	rf.size = resp.ContentLength
	etag := unquoteETag(resp.Header.Get("ETag"))
	rf.identity = "etag:" + etag
	// A full-object SHA-256 checksum (a multipart upload's composite one
	// ends in -N and is not the file's hash).
	if cs := resp.Header.Get("X-Amz-Checksum-Sha256"); cs != "" && !strings.Contains(cs, "-") {
		if b, err := base64.StdEncoding.DecodeString(cs); err == nil && len(b) == 32 {
			rf.sha256 = hex.EncodeToString(b)
		}
	}
	// A single-part upload's ETag is the MD5 of its content (unless
	// encrypted with SSE-KMS; a mismatch then says so).
	if rf.sha256 == "" && isHex(etag, 32) {
		rf.md5 = strings.ToLower(etag)
	}
	return rf, nil
}

// httpsFile describes a plain file: a HEAD gives its size when the server
// answers one.
func (f *fetcher) httpsFile(ctx context.Context, u string) (remoteFile, error) {
	rf := remoteFile{name: path.Base(u), display: u, size: -1}
	if i := strings.IndexAny(rf.name, "?#"); i >= 0 {
		rf.name = rf.name[:i]
	}
	rf.request = func(ctx context.Context, method string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err == nil {
			req.Header.Set("User-Agent", userAgent)
		}
		return req, err
	}
	req, err := rf.request(ctx, http.MethodHead)
	if err != nil {
		return rf, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return rf, fmt.Errorf("%s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		// No HEAD: size unknown until the GET.
	case resp.StatusCode >= 400:
		return rf, f.statusError(u, resp)
	default:
		rf.size = resp.ContentLength
		rf.identity = "etag:" + resp.Header.Get("ETag") + " modified:" + resp.Header.Get("Last-Modified")
	}
	return rf, nil
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func unquoteETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ErrNoSpace is a full cache volume: before a download when the volume has
// less room than the file needs, or when a write fails with ENOSPC.
var ErrNoSpace = errors.New("no space left on the cache volume")

package fetch

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// Options configure a fetch.
type Options struct {
	// CacheDir is the cache's root: blobs/, refs/, partial/ and locks/ live
	// under it.
	CacheDir string
	// HFEndpoint is the Hub's base URL (default https://huggingface.co).
	HFEndpoint string
	// HFToken is sent as a bearer token to the Hub (gated and private
	// repositories).
	HFToken string
	// S3 configures s3:// sources.
	S3 S3Config
	// Client does the requests (default: a client with no overall timeout,
	// as a model download takes as long as it takes).
	Client *http.Client
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// ProgressInterval is the time between progress lines (default 10s).
	ProgressInterval time.Duration
	// Tracker, when set, follows the fetch's progress for other goroutines
	// (the init container's progress endpoint).
	Tracker *Tracker
	// Attempts bounds the requests per file when a transfer breaks off;
	// each resumes where the last stopped (default 8).
	Attempts int
	// RetryDelay is the wait before the second attempt, doubling up to a
	// minute (default 1s; tests set a tiny one).
	RetryDelay time.Duration
	// Now is the clock (default time.Now); SigV4 signs with it.
	Now func() time.Time
	// FreeSpace reports the bytes free under a directory (default statfs);
	// tests replace it to exercise a full volume.
	FreeSpace func(dir string) (int64, error)
}

// S3Config is where and as whom s3:// sources are read.
type S3Config struct {
	// Endpoint of an S3-compatible store, e.g. http://minio.minio:9000
	// (default: AWS's regional endpoint https://s3.REGION.amazonaws.com).
	Endpoint string
	// Region signs requests (default us-east-1; MinIO accepts it).
	Region string
	S3Credentials
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Result is a finished fetch.
type Result struct {
	// Path is the file to load: the ref directory's model.gguf symlink
	// (ModelPath).
	Path string
	// Files are the blobs fetched or found, in order (one, or a split
	// set's parts).
	Files []string
	// Cached is true when the ref was already complete and nothing was
	// asked of the store.
	Cached bool
}

type fetcher struct {
	src        Source
	opts       Options
	client     *http.Client
	noRedirect *http.Client
	log        *slog.Logger
	track      *Tracker
}

// Fetch brings the model at rawURL into opts.CacheDir and returns the path
// to load. A complete ref is used without contacting the store; otherwise
// Fetch takes the URL's lock (waiting for a concurrent fetcher of the same
// URL, whose result it then finds), downloads every file not yet in blobs/,
// verifies each against the store's checksum, and publishes the ref.
func Fetch(ctx context.Context, rawURL string, opts Options) (Result, error) {
	src, err := ParseSource(rawURL)
	if err != nil {
		return Result{}, err
	}
	if opts.CacheDir == "" {
		return Result{}, errors.New("fetch: no cache directory")
	}
	f := &fetcher{src: src, opts: opts, client: opts.Client, log: opts.Log, track: opts.Tracker}
	if f.track == nil {
		f.track = new(Tracker)
	}
	f.track.phase(wire.FetchResolving)
	if f.client == nil {
		f.client = &http.Client{}
	}
	nr := *f.client
	nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f.noRedirect = &nr
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.opts.Attempts <= 0 {
		f.opts.Attempts = 8
	}
	if f.opts.RetryDelay <= 0 {
		f.opts.RetryDelay = time.Second
	}
	if f.opts.ProgressInterval <= 0 {
		f.opts.ProgressInterval = 10 * time.Second
	}
	if f.opts.FreeSpace == nil {
		f.opts.FreeSpace = freeSpace
	}
	for _, d := range []string{"blobs", "refs", "partial", "locks"} {
		if err := os.MkdirAll(filepath.Join(opts.CacheDir, d), 0o775); err != nil {
			return Result{}, fmt.Errorf("cache directory %s: %w", opts.CacheDir, noSpace(err))
		}
	}

	if r, ok := f.cached(); ok {
		f.track.done(filesSize(r.Files))
		return r, nil
	}
	unlock, err := f.lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	// A concurrent fetcher may have finished while we waited.
	if r, ok := f.cached(); ok {
		f.track.done(filesSize(r.Files))
		return r, nil
	}
	f.track.phase(wire.FetchResolving)
	files, err := f.files(ctx)
	if err != nil {
		return Result{}, err
	}
	sizes := make([]int64, len(files))
	for i := range files {
		sizes[i] = files[i].size
	}
	f.track.files(sizes)
	blobs := make([]string, len(files))
	for i := range files {
		if blobs[i], err = f.download(ctx, i, &files[i]); err != nil {
			return Result{}, err
		}
	}
	if err := f.publish(files, blobs); err != nil {
		return Result{}, err
	}
	f.track.done(filesSize(blobs))
	return Result{Path: ModelPath(opts.CacheDir, rawURL), Files: blobs}, nil
}

// cached returns the ref when it is complete: its model symlink and every
// file it names resolve.
func (f *fetcher) cached() (Result, bool) {
	dir := refDir(f.opts.CacheDir, f.src.URL)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Result{}, false
	}
	var blobs []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			f.log.Warn("cached model is incomplete; fetching again", "ref", dir, "file", e.Name())
			return Result{}, false
		}
		if e.Name() != ModelFile {
			target, _ := os.Readlink(p)
			blobs = append(blobs, filepath.Join(dir, target))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ModelFile)); err != nil {
		return Result{}, false
	}
	f.log.Info("model in cache", "url", f.src.URL, "path", filepath.Join(dir, ModelFile))
	return Result{Path: ModelPath(f.opts.CacheDir, f.src.URL), Files: blobs, Cached: true}, true
}

// lock takes the URL's exclusive file lock, waiting for another holder (a
// pod on the same shared volume fetching the same model).
func (f *fetcher) lock(ctx context.Context) (func(), error) {
	p := filepath.Join(f.opts.CacheDir, "locks", RefKey(f.src.URL)+".lock")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o664)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, noSpace(err))
	}
	waiting := false
	for {
		err := unix.Flock(int(fd.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			fd.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if !waiting {
			f.log.Info("another fetcher holds the model's lock; waiting for it", "lock", p)
			f.track.phase(wire.FetchWaiting)
			waiting = true
		}
		select {
		case <-ctx.Done():
			fd.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		unix.Flock(int(fd.Fd()), unix.LOCK_UN)
		fd.Close()
	}, nil
}

// publish writes the ref directory in a temporary place and renames it
// into refs/, so a ref is either absent or complete.
func (f *fetcher) publish(files []remoteFile, blobs []string) error {
	dir := refDir(f.opts.CacheDir, f.src.URL)
	tmp := dir + ".tmp-" + randomSuffix()
	if err := os.MkdirAll(tmp, 0o775); err != nil {
		return noSpace(err)
	}
	defer os.RemoveAll(tmp)
	for i, rf := range files {
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blobs[i])), filepath.Join(tmp, rf.name)); err != nil {
			return fmt.Errorf("ref %s: %w", dir, noSpace(err))
		}
	}
	if files[0].name != ModelFile {
		if err := os.Symlink(files[0].name, filepath.Join(tmp, ModelFile)); err != nil {
			return fmt.Errorf("ref %s: %w", dir, noSpace(err))
		}
	}
	// A stale, incomplete ref (a blob removed by hand) is replaced.
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("ref %s: %w", dir, err)
	}
	f.log.Info("model ready", "url", f.src.URL, "path", filepath.Join(dir, ModelFile), "files", len(files))
	return nil
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// download brings one file into blobs/ and returns the blob's path. A blob
// already there under the expected SHA-256 is reused; a partial download
// of the same remote version is resumed.
func (f *fetcher) download(ctx context.Context, index int, rf *remoteFile) (string, error) {
	blobDir := filepath.Join(f.opts.CacheDir, "blobs")
	if rf.sha256 != "" {
		p := filepath.Join(blobDir, "sha256-"+rf.sha256)
		if st, err := os.Stat(p); err == nil && (rf.size < 0 || st.Size() == rf.size) {
			f.log.Info("file in cache", "file", rf.display, "blob", p)
			f.track.finished(index, st.Size())
			return p, nil
		}
	}
	// Keyed by the source URL too: its lock makes the partial file this
	// fetcher's alone, though another URL (a quantisation selector and a
	// path) may name the same file.
	partKey := RefKey(f.src.URL + "\n" + rf.display)
	part := filepath.Join(f.opts.CacheDir, "partial", partKey+".part")
	idFile := part + ".id"
	if b, err := os.ReadFile(idFile); err != nil || string(b) != rf.identity {
		// Another version's partial (or none): start over.
		os.Remove(part)
		if err := os.WriteFile(idFile, []byte(rf.identity), 0o664); err != nil {
			return "", fmt.Errorf("%s: %w", idFile, noSpace(err))
		}
	}
	out, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o664)
	if err != nil {
		return "", fmt.Errorf("%s: %w", part, noSpace(err))
	}
	defer out.Close()

	// The hashes cover the whole file: a resumed download first reads what
	// it has.
	sh := sha256.New()
	var mh hash.Hash
	if rf.md5 != "" {
		mh = md5.New()
	}
	hashes := func() io.Writer {
		if mh != nil {
			return io.MultiWriter(sh, mh)
		}
		return sh
	}
	have, err := io.Copy(hashes(), out)
	if err != nil {
		return "", fmt.Errorf("read partial download %s: %w", part, err)
	}
	if rf.size >= 0 && have > rf.size {
		// Longer than the file: not a prefix of it.
		if err := out.Truncate(0); err != nil {
			return "", err
		}
		out.Seek(0, io.SeekStart)
		sh.Reset()
		if mh != nil {
			mh.Reset()
		}
		have = 0
	}
	if have > 0 {
		f.log.Info("resuming download", "file", rf.display, "have_bytes", have, "total_bytes", rf.size)
	}
	if rf.size >= 0 {
		if free, err := f.opts.FreeSpace(f.opts.CacheDir); err == nil && free < rf.size-have {
			return "", fmt.Errorf("%s: %w: %s needs %d more bytes, %s has %d free", rf.display, ErrNoSpace, rf.name, rf.size-have, f.opts.CacheDir, free)
		}
	}

	p := &progress{log: f.log, file: rf.display, total: rf.size, done: have, every: f.opts.ProgressInterval, now: f.opts.now,
		track: f.track, index: index}
	f.track.downloading(index, have, rf.size)
	p.start, p.startDone = f.opts.now(), have
	p.last = p.start
	delay := f.opts.RetryDelay
	for attempt := 1; ; attempt++ {
		done, err := f.transfer(ctx, rf, out, hashes(), &have, p, func() {
			sh.Reset()
			if mh != nil {
				mh.Reset()
			}
		})
		if done {
			break
		}
		var he *HTTPError
		if errors.As(err, &he) && he.permanent() || errors.Is(err, ErrNoSpace) || ctx.Err() != nil || attempt >= f.opts.Attempts {
			if !errors.As(err, &he) && !errors.Is(err, ErrNoSpace) && ctx.Err() == nil {
				err = fmt.Errorf("%s: giving up after %d attempts (%d of %s bytes kept in %s to resume): %w", rf.display, attempt, have, sizeString(rf.size), part, err)
			}
			return "", err
		}
		f.log.Warn("download interrupted; resuming", "file", rf.display, "have_bytes", have, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
	p.report(true)

	got := hex.EncodeToString(sh.Sum(nil))
	if rf.size >= 0 && have != rf.size {
		os.Remove(part)
		return "", fmt.Errorf("%s: downloaded %d bytes, the store said %d; partial file removed", rf.display, have, rf.size)
	}
	if rf.sha256 != "" && got != rf.sha256 {
		os.Remove(part)
		return "", fmt.Errorf("%s: checksum mismatch: the store says SHA-256 %s, the download has %s; partial file removed", rf.display, rf.sha256, got)
	}
	if mh != nil {
		if gotMD5 := hex.EncodeToString(mh.Sum(nil)); gotMD5 != rf.md5 {
			os.Remove(part)
			return "", fmt.Errorf("%s: checksum mismatch: the object's ETag says MD5 %s, the download has %s (an SSE-KMS-encrypted object's ETag is no MD5); partial file removed", rf.display, rf.md5, gotMD5)
		}
	}
	if err := out.Sync(); err != nil {
		return "", fmt.Errorf("%s: %w", part, noSpace(err))
	}
	blob := filepath.Join(blobDir, "sha256-"+got)
	if err := os.Rename(part, blob); err != nil {
		return "", fmt.Errorf("%s: %w", blob, err)
	}
	os.Remove(idFile)
	f.track.finished(index, have)
	if rf.sha256 == "" && rf.md5 == "" {
		f.log.Info("the store publishes no checksum for this file; its SHA-256 is the blob's name", "file", rf.display, "sha256", got)
	}
	return blob, nil
}

// transfer runs one GET from *have on, appending to out and hashing into
// h. It returns done when the file is complete; reset restarts the hashes
// when the server sends the whole file again.
func (f *fetcher) transfer(ctx context.Context, rf *remoteFile, out *os.File, h io.Writer, have *int64, p *progress, reset func()) (bool, error) {
	if rf.size >= 0 && *have == rf.size {
		return true, nil
	}
	req, err := rf.request(ctx, http.MethodGet)
	if err != nil {
		return false, err
	}
	if *have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(*have, 10)+"-")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && *have > 0 && rf.size < 0:
		return true, nil // we had it all
	case resp.StatusCode == http.StatusPartialContent && *have > 0:
		if start := contentRangeStart(resp.Header.Get("Content-Range")); start != *have {
			return false, fmt.Errorf("the server resumed at byte %d, not %d", start, *have)
		}
	case resp.StatusCode == http.StatusOK:
		if *have > 0 {
			// The server ignored the Range: take the whole file again.
			f.log.Info("the server does not resume; downloading from the start", "file", rf.display)
			if err := out.Truncate(0); err != nil {
				return false, err
			}
			reset()
			*have, p.done = 0, 0
		}
		if rf.size < 0 && resp.ContentLength >= 0 {
			rf.size, p.total = resp.ContentLength, resp.ContentLength
		}
	default:
		return false, f.statusError(rf.display, resp)
	}
	if _, err := out.Seek(*have, io.SeekStart); err != nil {
		return false, err
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return false, fmt.Errorf("%s: write %s: %w", rf.display, out.Name(), noSpace(err))
			}
			h.Write(buf[:n])
			*have += int64(n)
			p.done = *have
			p.report(false)
		}
		if rerr == io.EOF {
			if rf.size >= 0 && *have < rf.size {
				return false, io.ErrUnexpectedEOF
			}
			return true, nil
		}
		if rerr != nil {
			return false, rerr
		}
	}
}

func contentRangeStart(h string) int64 {
	// bytes START-END/TOTAL
	s, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return -1
	}
	s, _, _ = strings.Cut(s, "-")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// noSpace turns ENOSPC into ErrNoSpace, which names the cause plainly.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w (%v): give the cache volume more room or remove unused blobs", ErrNoSpace, err)
	}
	return err
}

func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// filesSize is the bytes of the files at paths (symlinks followed).
func filesSize(paths []string) int64 {
	var n int64
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

func sizeString(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

// progress logs a download's bytes done every interval and at the end,
// and keeps the tracker's count at every report.
type progress struct {
	log         *slog.Logger
	file        string
	total, done int64
	every       time.Duration
	now         func() time.Time
	start, last time.Time
	startDone   int64
	track       *Tracker
	index       int
}

func (p *progress) report(final bool) {
	p.track.downloading(p.index, p.done, p.total)
	t := p.now()
	if !final && t.Sub(p.last) < p.every {
		return
	}
	p.last = t
	attrs := []any{"file", p.file, "done_bytes", p.done, "total_bytes", p.total}
	if p.total > 0 {
		attrs = append(attrs, "percent", fmt.Sprintf("%.1f", 100*float64(p.done)/float64(p.total)))
	}
	if secs := t.Sub(p.start).Seconds(); secs > 0 {
		attrs = append(attrs, "mib_per_s", fmt.Sprintf("%.1f", float64(p.done-p.startDone)/secs/(1<<20)))
	}
	msg := "downloading"
	if final {
		msg = "downloaded"
	}
	p.log.Info(msg, attrs...)
}

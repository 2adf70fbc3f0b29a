package modelstore

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// S3 emulates an S3-compatible store (MinIO-like, path-style): objects
// under /BUCKET/KEY with their MD5 as ETag, Range requests, and the
// refusals of a real store for unsigned requests and missing keys. It is
// shared by internal/runtime/fetch's unit tests and the e2e suite, whose
// fetches must meet the same store.
type S3 struct {
	// Objects maps bucket/key to content.
	Objects map[string][]byte
	// Verify checks a request's authentication (its SigV4 signature); an
	// error is answered with 403 SignatureDoesNotMatch. Nil accepts all.
	Verify func(*http.Request) error
	// Checksum publishes x-amz-checksum-sha256 in checksum mode; otherwise
	// the ETag is the only checksum.
	Checksum bool
	// BadChecksum publishes a wrong x-amz-checksum-sha256.
	BadChecksum bool
	// ETag replaces the MD5 ETag (a multipart upload's, or a corrupt one).
	ETag string
	// AbortGETs GETs, the first ones, send a third of the object and drop
	// the connection.
	AbortGETs int

	mu   sync.Mutex
	gets []string
}

func (s *S3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Verify != nil {
		if err := s.Verify(r); err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message></Error>`, err)
			return
		}
	}
	b, ok := s.Objects[strings.TrimPrefix(r.URL.Path, "/")]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
		return
	}
	m := md5.Sum(b)
	etag := hex.EncodeToString(m[:])
	if s.ETag != "" {
		etag = s.ETag
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	if s.Checksum && r.Header.Get("X-Amz-Checksum-Mode") == "ENABLED" {
		sum := sha256.Sum256(b)
		if s.BadChecksum {
			sum = sha256.Sum256(nil)
		}
		w.Header().Set("X-Amz-Checksum-Sha256", base64.StdEncoding.EncodeToString(sum[:]))
	}
	if r.Method == http.MethodGet {
		s.mu.Lock()
		s.gets = append(s.gets, r.Header.Get("Range"))
		s.mu.Unlock()
	}
	ServeBlob(w, r, b, &s.mu, &s.AbortGETs, len(b)/3, false)
}

// GETs is the Range header of each object GET so far.
func (s *S3) GETs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.gets...)
}

// ServeBlob serves b with Range support (none with noRange), or, while
// *abortGETs (guarded by mu) is above zero, answers a GET with abortAfter
// bytes of b, drops the connection and decrements *abortGETs.
func ServeBlob(w http.ResponseWriter, r *http.Request, b []byte, mu *sync.Mutex, abortGETs *int, abortAfter int, noRange bool) {
	mu.Lock()
	abort := r.Method == http.MethodGet && *abortGETs > 0
	if abort {
		*abortGETs--
	}
	mu.Unlock()
	if abort {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:abortAfter])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	if noRange {
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

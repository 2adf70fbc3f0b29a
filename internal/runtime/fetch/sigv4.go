package fetch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// S3Credentials sign requests to an S3-compatible store with AWS Signature
// Version 4. Empty AccessKeyID means anonymous requests (a public bucket).
type S3Credentials struct {
	AccessKeyID, SecretAccessKey string
	// SessionToken is sent as X-Amz-Security-Token (temporary credentials).
	SessionToken string
}

// emptySHA256 is the SHA-256 of an empty payload, which GET and HEAD sign.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

const amzDateFormat = "20060102T150405Z"

// signV4 signs req in place with AWS Signature Version 4 (the Authorization
// header form): it sets X-Amz-Date (and X-Amz-Security-Token), signs the
// Host header and every X-Amz-* header, and payloadHash as the request's
// body hash. The canonical URI is the request's escaped path as sent, which
// is S3's rule (no second encoding, no normalisation); the callers build
// paths with uriEncodePath so that the escaped path is AWS's encoding.
func signV4(req *http.Request, c S3Credentials, region, service, payloadHash string, now time.Time) {
	amzDate := now.UTC().Format(amzDateFormat)
	req.Header.Set("X-Amz-Date", amzDate)
	if c.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	signed, canonical := canonicalRequest(req.Method, req.URL.EscapedPath(), req.URL.Query(), host, req.Header, payloadHash)
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	sig := signature(c.SecretAccessKey, amzDate, scope, canonical)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.AccessKeyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

// canonicalRequest is SigV4's canonical request over the host and the X-Amz-*
// headers; it returns the signed header list too.
func canonicalRequest(method, escapedPath string, query url.Values, host string, h http.Header, payloadHash string) (string, string) {
	if escapedPath == "" {
		escapedPath = "/"
	}
	headers := map[string]string{"host": strings.TrimSpace(host)}
	for k, vs := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") {
			trimmed := make([]string, len(vs))
			for i, v := range vs {
				trimmed[i] = strings.Join(strings.Fields(v), " ")
			}
			headers[lk] = strings.Join(trimmed, ",")
		}
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(method + "\n" + escapedPath + "\n" + canonicalQuery(query) + "\n")
	for _, k := range names {
		b.WriteString(k + ":" + headers[k] + "\n")
	}
	signed := strings.Join(names, ";")
	b.WriteString("\n" + signed + "\n" + payloadHash)
	return signed, b.String()
}

func canonicalQuery(q url.Values) string {
	pairs := make([]string, 0, len(q))
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// signature is the hex HMAC of the string to sign under the key derived
// from the secret, the date, region and service of scope.
func signature(secret, amzDate, scope, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	parts := strings.Split(scope, "/") // date/region/service/aws4_request
	key := []byte("AWS4" + secret)
	for _, p := range parts {
		key = hmacSHA256(key, p)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode is SigV4's URI encoding: every byte but the unreserved
// characters A-Z a-z 0-9 - _ . ~ as %XX (upper case); '/' kept unless
// encodeSlash.
func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// uriEncodePath sets u's path to p with SigV4's encoding as its escaped
// form, so the path sent is the path signed.
func uriEncodePath(u *url.URL, p string) {
	u.Path = p
	u.RawPath = uriEncode(p, false)
}

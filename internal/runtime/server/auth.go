package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
)

// LoadAPIKeys reads one key per line; blank lines and lines starting with
// '#' are skipped.
func LoadAPIKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("API key file: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("API key file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("API key file %s holds no keys", path)
	}
	return keys, nil
}

// keySet checks bearer tokens against digests of the configured keys, in
// time independent of where a guess differs.
type keySet [][sha256.Size]byte

func newKeySet(keys []string) keySet {
	ks := make(keySet, len(keys))
	for i, k := range keys {
		ks[i] = sha256.Sum256([]byte(k))
	}
	return ks
}

// allows reports whether an Authorization header value carries a valid key.
func (ks keySet) allows(authorization string) bool {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := 0
	for i := range ks {
		found |= subtle.ConstantTimeCompare(d[:], ks[i][:])
	}
	return found == 1
}

package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
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

// keySet checks API keys against digests of the configured keys, in time
// independent of where a guess differs, and names each key's owner.
type keySet struct {
	digests [][sha256.Size]byte
	owners  []programs.Owner
}

// newKeySet keeps digests of keys; secret keys the owner digests (see
// programs.OwnerOf). The keys themselves are not kept.
func newKeySet(keys []string, secret []byte) *keySet {
	ks := &keySet{digests: make([][sha256.Size]byte, len(keys)), owners: make([]programs.Owner, len(keys))}
	for i, k := range keys {
		ks.digests[i] = sha256.Sum256([]byte(k))
		ks.owners[i] = programs.OwnerOf(k, secret)
	}
	return ks
}

// HeaderAPIKey is Anthropic's API key header, taken as "Authorization:
// Bearer <key>" is.
const HeaderAPIKey = "X-Api-Key"

// presentedKey is the API key a request presents: the bearer token of its
// Authorization header, else its x-api-key header. An Authorization header
// of another scheme (Basic, added by a proxy or an SDK) carries no key of
// ours, so it does not hide the x-api-key beside it.
func presentedKey(h http.Header) (string, bool) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	if strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(token)
		return token, token != ""
	}
	if k := strings.TrimSpace(h.Get(HeaderAPIKey)); k != "" {
		return k, true
	}
	return "", false
}

// match returns the owner of the key a request presents; ok is false when
// it presents none of the configured keys.
func (ks *keySet) match(h http.Header) (programs.Owner, bool) {
	key, ok := presentedKey(h)
	if !ok {
		return "", false
	}
	d := sha256.Sum256([]byte(key))
	found := -1
	for i := range ks.digests {
		if subtle.ConstantTimeCompare(d[:], ks.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return ks.owners[found], true
}

// ownerKey carries a request's owner in its context, from authenticate to
// ownerOf.
type ownerKey struct{}

// ownerOf is the owner authenticate derived for r: what scopes its
// programs and its stored responses ("" on a pod that requires no key).
func ownerOf(r *http.Request) programs.Owner {
	owner, _ := r.Context().Value(ownerKey{}).(programs.Owner)
	return owner
}

// authenticate is the one place a request's owner is derived: the owner of
// the API key it presents (Authorization: Bearer, or x-api-key), "" on a
// pod that requires no key. ok is false when a key is required and none of
// the configured ones is presented. The owner rides in the returned
// request's context.
func (s *Server) authenticate(r *http.Request) (*http.Request, bool) {
	if s.keys == nil {
		return r, true
	}
	owner, ok := s.keys.match(r.Header)
	if !ok {
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)), true
}

// program is the program a request belongs to.
type program struct {
	// ID is the program's id in the program table, the controller's view
	// and between pods: the client's id scoped to its owner.
	ID string
	// Name is the id as the client gave it.
	Name string
	// Owner is the API key's owner.
	Owner programs.Owner
}

// programOf is the one place a request's program is derived (every
// endpoint that takes a program calls it): the id the client names, in
// the order openai.ProgramID takes the headers and the body's fields,
// checked, and scoped to the owner authenticate derived. The zero program
// (ID "") is a request of no program. A bad id is a 400 naming
// program_id, or prompt_cache_key when the id came from it.
func (s *Server) programOf(r *http.Request, body openai.BodyProgram) (program, *openai.Error) {
	name, param := openai.ProgramID(r.Header.Get, body)
	if name == "" {
		return program{}, nil
	}
	// The control API refuses such ids in placements: one accepted here
	// could never be placed.
	if err := programs.CheckID(name); err != nil {
		return program{}, openai.BadRequest(param, "%v", err)
	}
	owner := ownerOf(r)
	return program{ID: owner.Scope(name), Name: name, Owner: owner}, nil
}

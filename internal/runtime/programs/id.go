package programs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen bounds a program id in bytes.
const MaxIDLen = 256

// CheckID says why id cannot name a program, or returns nil. The server
// refuses such ids from clients and the control API from the controller,
// so an id that reaches the table is always one both accept.
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty program id")
	case len(id) > MaxIDLen:
		return fmt.Errorf("program id of %d bytes; at most %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("program id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		// C0, DEL and C1 (U+0080–U+009F, e.g. NEL, a line break to some
		// log readers).
		if unicode.IsControl(r) {
			return fmt.Errorf("program id %q contains a control character", id)
		}
	}
	return nil
}

// MaxPauseLimit is the longest pause limit a placement may set: the
// SchedulerPolicy's own bound on maxPauseDuration. Larger values are
// refused by the control API and capped by Apply, so a pause limit never
// overflows into a negative duration.
const MaxPauseLimit = 24 * time.Hour

// Owner names the API key a program belongs to: a keyed digest of the key
// (OwnerOf), never the key itself, so it may be logged and reported to the
// controller. "" is the one owner of a pod that requires no API key.
type Owner string

// ownerLen is the length of an Owner in hex digits (128 bits).
const ownerLen = 32

// MaxScopedIDLen bounds a program id as the table, the controller and
// placements know it: a client's id scoped to its owner.
const MaxScopedIDLen = ownerLen + 1 + MaxIDLen

// OwnerOf is the owner of an API key. secret keys the digest (the pool's
// control token, which every pod of a pool shares, so the pods agree on
// owners): the digests the controller sees tell nothing about the keys
// to anyone without it.
func OwnerOf(apiKey string, secret []byte) Owner {
	m := hmac.New(sha256.New, append([]byte("kvpilot-program-owner\x00"), secret...))
	m.Write([]byte(apiKey))
	return Owner(hex.EncodeToString(m.Sum(nil)[:ownerLen/2]))
}

// Scope is the table's id of the program a client of owner o names id:
// "<owner>/<id>", or id itself for the owner "". Programs of different
// owners never share an entry, so no key can see, join, pause or release
// another key's program, even by guessing its id.
func (o Owner) Scope(id string) string {
	if o == "" {
		return id
	}
	return string(o) + "/" + id
}

// split returns the owner and the client's id of a table id; ok is false
// for an id that no owner scoped.
func split(scoped string) (o Owner, id string, ok bool) {
	if len(scoped) <= ownerLen || scoped[ownerLen] != '/' {
		return "", scoped, false
	}
	for _, c := range []byte(scoped[:ownerLen]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", scoped, false
		}
	}
	return Owner(scoped[:ownerLen]), scoped[ownerLen+1:], true
}

// ownerOfID is the owner a table id was scoped to ("" if none).
func ownerOfID(id string) Owner {
	o, _, _ := split(id)
	return o
}

// ClientID is a table id as its client named it, without its owner: what
// messages to the client quote.
func ClientID(id string) string {
	_, rest, _ := split(id)
	return rest
}

// CheckScopedID is CheckID for ids as the table knows them (placements):
// a client's id, scoped to its owner or not.
func CheckScopedID(id string) error {
	_, rest, _ := split(id)
	return CheckID(rest)
}

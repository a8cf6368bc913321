package export

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// A compacted stream keeps one subject per key, so every key becomes a
// subject token (and a KV key): KeyToken is the encoding, chosen so that
// a URL stays readable in `nats stream subjects` and `nats kv ls`.
//
// The bytes 'A'…'Z', 'a'…'z', '0'…'9', '-', '_' and '/' stand for
// themselves; every other byte (the '.' that separates subject tokens,
// spaces, wildcards, '=', ':' and all non-ASCII bytes included) is written
// '=' and two upper-case hex digits. So "http://a.example/x?y" is the
// token "http=3A//a=2Eexample/x=3Fy", a valid subject token and a valid
// KV key. A key whose token would be longer than the sink's limit
// (MaxToken, DefaultMaxToken) is named by its hash instead: "==" and the
// 64 hex digits of its SHA-256 (an encoded key never holds "==", since
// '=' always starts an escape); such a message carries the full key in
// its HeaderKey header, as every message of the sinks does.
const (
	// DefaultMaxToken is the default bound on a key's token: longer
	// tokens are hashed.
	DefaultMaxToken = 256
	// hashedPrefix starts the token of a hashed key.
	hashedPrefix = "=="
	// minMaxToken is the shortest usable bound: a hashed token's length.
	minMaxToken = len(hashedPrefix) + 2*sha256.Size
)

// errBadToken reports a token KeyToken did not make.
var errBadToken = errors.New("not a key token")

func tokenByteKept(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/'
}

// KeyToken is the subject token (and KV key) of key under a bound of max
// bytes (DefaultMaxToken if max < 1): the escaped key, or "==" and its
// SHA-256 if the escaped key is longer than max. hashed reports which.
func KeyToken(key []byte, max int) (token string, hashed bool) {
	if max < 1 {
		max = DefaultMaxToken
	}
	n := 0
	for _, c := range key {
		if tokenByteKept(c) {
			n++
		} else {
			n += 3
		}
	}
	if n > max || len(key) == 0 {
		h := sha256.Sum256(key)
		return hashedPrefix + hex.EncodeToString(h[:]), true
	}
	var b strings.Builder
	b.Grow(n)
	for _, c := range key {
		if tokenByteKept(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String(), false
}

// DecodeKeyToken is the inverse of KeyToken for a token that is not
// hashed; for a hashed one it returns hashed true and no key (the
// message's HeaderKey holds it).
func DecodeKeyToken(token string) (key []byte, hashed bool, err error) {
	if strings.HasPrefix(token, hashedPrefix) {
		return nil, true, nil
	}
	if token == "" {
		return nil, false, errBadToken
	}
	out := make([]byte, 0, len(token))
	for i := 0; i < len(token); i++ {
		c := token[i]
		switch {
		case tokenByteKept(c):
			out = append(out, c)
		case c == '=' && i+2 < len(token):
			v, err := strconv.ParseUint(token[i+1:i+3], 16, 8)
			if err != nil {
				return nil, false, errBadToken
			}
			out = append(out, byte(v))
			i += 2
		default:
			return nil, false, errBadToken
		}
	}
	return out, false, nil
}

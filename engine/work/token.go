package work

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// tokenVersion is the first byte of every token.
const tokenVersion = 3

// maxIDLen bounds an item id (one KV key token).
const maxIDLen = 128

// maxReplyLen bounds the ack reply subject a token carries.
const maxReplyLen = 1024

// tokenHead is the fixed part of a token's bytes before the id: version,
// seq, delivered, nonce, lease expiry, id length.
const tokenHead = 1 + 8 + 8 + 8 + 8 + 1

// maxTokenLen bounds a token's text.
const maxTokenLen = 2048

var errBadToken = errors.New("work: malformed token")

// grant is what a token identifies: one grant of one delivery of one item,
// with the lease's expiry and the delivery's ack reply subject as the
// engine granted them. Nonce is random per grant, so two grants of the same
// delivery count (JetStream repeats one after losing consumer state) are
// told apart. A grant that is not in the item's record yet (see unrecorded
// grants in claim.go) is settled from these fields; the HMAC makes them the
// engine's word, not the worker's.
type grant struct {
	ID         string
	Seq        uint64
	Delivered  uint64
	Nonce      uint64
	LeaseUntil int64 // Unix milliseconds
	Reply      string
}

// tokenMAC computes the HMAC-SHA256 of g under key.
func tokenMAC(key []byte, g grant) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(grantBytes(g))
	return m.Sum(nil)
}

// grantBytes is the signed part of a token: version, seq, delivered,
// nonce, lease expiry, id length, id, reply length (2 bytes), reply.
func grantBytes(g grant) []byte {
	b := make([]byte, 0, tokenHead+len(g.ID)+2+len(g.Reply))
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, g.Seq)
	b = binary.BigEndian.AppendUint64(b, g.Delivered)
	b = binary.BigEndian.AppendUint64(b, g.Nonce)
	b = binary.BigEndian.AppendUint64(b, uint64(g.LeaseUntil))
	b = append(b, byte(len(g.ID)))
	b = append(b, g.ID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(g.Reply)))
	return append(b, g.Reply...)
}

// encodeToken returns the opaque token of g: base64url(grant bytes ‖ mac).
// g.ID must be a valid id and g.Reply at most maxReplyLen bytes.
func encodeToken(key []byte, g grant) string {
	b := grantBytes(g)
	b = append(b, tokenMAC(key, g)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseToken decodes a token without verifying it. It never panics on any
// input.
func parseToken(s string) (grant, []byte, error) {
	if len(s) == 0 || len(s) > maxTokenLen {
		return grant{}, nil, errBadToken
	}
	for i := 0; i < len(s); i++ {
		// The decoder skips CR and LF: refuse anything outside the alphabet
		// so one token has one spelling.
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return grant{}, nil, errBadToken
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return grant{}, nil, errBadToken
	}
	const head = tokenHead
	if len(b) < head || b[0] != tokenVersion {
		return grant{}, nil, errBadToken
	}
	n := int(b[head-1])
	if n == 0 || n > maxIDLen || len(b) < head+n+2 {
		return grant{}, nil, errBadToken
	}
	r := int(binary.BigEndian.Uint16(b[head+n:]))
	rest := head + n + 2
	if r > maxReplyLen || len(b) != rest+r+sha256.Size {
		return grant{}, nil, errBadToken
	}
	g := grant{
		Seq:        binary.BigEndian.Uint64(b[1:9]),
		Delivered:  binary.BigEndian.Uint64(b[9:17]),
		Nonce:      binary.BigEndian.Uint64(b[17:25]),
		LeaseUntil: int64(binary.BigEndian.Uint64(b[25:33])),
		ID:         string(b[head : head+n]),
		Reply:      string(b[rest : rest+r]),
	}
	if !validID(g.ID) {
		return grant{}, nil, errBadToken
	}
	return g, b[rest+r:], nil
}

// verifyToken decodes and authenticates a token.
func verifyToken(key []byte, s string) (grant, error) {
	g, mac, err := parseToken(s)
	if err != nil {
		return grant{}, err
	}
	if !hmac.Equal(mac, tokenMAC(key, g)) {
		return grant{}, errBadToken
	}
	return g, nil
}

// validID reports whether id can be an item id: 1..128 of [A-Za-z0-9_-=],
// which is also a valid KV key token and safe in a Nats-Msg-Id.
func validID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '=':
		default:
			return false
		}
	}
	return true
}

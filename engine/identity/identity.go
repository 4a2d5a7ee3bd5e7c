package identity

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// maxRequestInfo bounds the Nats-Request-Info value decoded.
const maxRequestInfo = 64 << 10

// requestInfo holds the fields of Nats-Request-Info that identify a caller.
type requestInfo struct {
	Account string `json:"acc"`
	User    string `json:"user"`
}

// Principal returns the principal of a request with headers h. Unless trust
// is set, or when the Nats-Request-Info header is absent, it is
// protocol.Anonymous. A trusted header that does not decode or names no
// account is ErrUnauthenticated (with principal anonymous).
//
// When the header holds several values the last one counts: the NATS
// server strips the client's copies and appends its own at the end of the
// header block, so the last value is the server's even if a copy the
// client wrote survived.
func Principal(h map[string][]string, trust bool) (string, error) {
	if !trust {
		return protocol.Anonymous, nil
	}
	v := h[protocol.HeaderRequestInfo]
	if len(v) == 0 {
		return protocol.Anonymous, nil
	}
	return ParseRequestInfo(v[len(v)-1])
}

// ParseRequestInfo returns the principal "<acc>/<user>" ("<acc>" when user
// is empty) of a Nats-Request-Info value, or ErrUnauthenticated.
func ParseRequestInfo(raw string) (string, error) {
	if len(raw) > maxRequestInfo {
		return protocol.Anonymous, fmt.Errorf("%w: request info too large", ErrUnauthenticated)
	}
	var ri requestInfo
	if acc, user, ok := principalFast(raw); ok {
		ri = requestInfo{Account: acc, User: user}
	} else if err := json.Unmarshal([]byte(raw), &ri); err != nil {
		return protocol.Anonymous, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if ri.Account == "" {
		return protocol.Anonymous, fmt.Errorf("%w: no account", ErrUnauthenticated)
	}
	if ri.User == "" {
		return ri.Account, nil
	}
	return ri.Account + "/" + ri.User, nil
}

// Class returns the class named by X-Resource-Priority in h (the header name
// matched in any letter case, the value through priority.Parse):
// Orchestration when absent, ErrUnknownClass when it is not a class.
// Baggage is not consulted.
func Class(h map[string][]string) (priority.Class, error) {
	v, ok := header(h, priority.Header)
	if !ok {
		return priority.Orchestration, nil
	}
	c, err := priority.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnknownClass, err)
	}
	return c, nil
}

// header returns the first value of name, matched exactly first, then in any
// letter case.
func header(h map[string][]string, name string) (string, bool) {
	if v, ok := h[name]; ok && len(v) > 0 {
		return v[0], true
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0], true
		}
	}
	return "", false
}

// Ceilings maps a principal to the highest class it may run at. A principal
// without an entry is not clamped (its ceiling is Interactive). The nil map
// clamps nobody.
type Ceilings map[string]priority.Class

// ParseCeilings parses PRINCIPAL=CLASS specifications (the --ceiling flag;
// EDICT_CEILINGS holds them comma-separated, see [SplitList]). A later entry
// for the same principal wins.
func ParseCeilings(specs []string) (Ceilings, error) {
	c := Ceilings{}
	for _, s := range specs {
		p, cl, ok := strings.Cut(s, "=")
		p = strings.TrimSpace(p)
		if !ok || p == "" {
			return nil, fmt.Errorf("%w %q: want PRINCIPAL=CLASS", ErrCeiling, s)
		}
		class, err := priority.Parse(cl)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrCeiling, s, err)
		}
		c[p] = class
	}
	return c, nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Ceiling returns the highest class principal may run at.
func (c Ceilings) Ceiling(principal string) priority.Class {
	if cl, ok := c[principal]; ok && cl.Valid() {
		return cl
	}
	return priority.Interactive
}

// Resolver turns a request's headers into a protocol.Caller.
type Resolver struct {
	// TrustRequestInfo trusts Nats-Request-Info (see the package comment).
	TrustRequestInfo bool
	// Ceilings clamps classes per principal; nil clamps nobody.
	Ceilings Ceilings
}

// Resolve returns the caller of a request with headers h: its principal,
// its class clamped to the principal's ceiling, and that ceiling. err is
// ErrUnknownClass (a 400) or ErrUnauthenticated; with ErrUnauthenticated the
// returned caller is the anonymous one, so a caller not enforcing
// authentication can still use it.
func (r Resolver) Resolve(h map[string][]string) (protocol.Caller, error) {
	class, err := Class(h)
	if err != nil {
		return protocol.Caller{}, err
	}
	principal, authErr := Principal(h, r.TrustRequestInfo)
	ceiling := r.Ceilings.Ceiling(principal)
	return protocol.Caller{Principal: principal, Class: class.Clamp(ceiling), Ceiling: ceiling}, authErr
}

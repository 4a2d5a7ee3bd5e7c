package workitems

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzClaimReply: whatever the engine (or something impersonating it)
// answers to a claim, decoding and validating it never panics, and yields
// nothing, a complete claim, or an error wrapping ErrBackend.
func FuzzClaimReply(f *testing.F) {
	for _, s := range []string{
		`{"claimed":false,"reason":"empty"}`,
		`{"claimed":true,"id":"a","type":"document","class":"background_ingestion","tenant":"","payload":{"x":1},"attempt":1,"max_attempts":3,"lease_expires_at":"2026-12-01T08:00:00Z","token":"t"}`,
		`{"claimed":true,"id":"a","token":"t","attempt":1,"max_attempts":3,"class":"urgent","lease_expires_at":"2026-12-01T08:00:00Z"}`,
		`{"claimed":true,"id":"a","token":"t","attempt":0,"max_attempts":3}`,
		`{"claimed":true,"id":"a","token":"t","attempt":1,"max_attempts":1,"class":"interactive","lease_expires_at":"yesterday"}`,
		`null`, `[]`, `{"claimed":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rep claimReply
		if json.Unmarshal(data, &rep) != nil {
			return // call() turns this into ErrBackend before validation
		}
		cl, err := claimFromReply(rep)
		switch {
		case err != nil:
			if cl != nil || !errors.Is(err, ErrBackend) {
				t.Fatalf("claimFromReply(%s) = %v, %v", data, cl, err)
			}
		case cl == nil:
			if rep.Claimed {
				t.Fatalf("claimed reply %s gave no claim", data)
			}
		default:
			if cl.ID == "" || cl.Token == "" || cl.Attempt < 1 || cl.MaxAttempts < 1 || !cl.Class.Valid() || cl.LeaseExpiresAt.IsZero() {
				t.Fatalf("incomplete claim %+v from %s", cl, data)
			}
		}
	})
}

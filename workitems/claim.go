package workitems

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/edictrt/edict/priority"
)

// Claim is one claimed item and its lease. Settle it with exactly one of
// Ack, Retry, Defer, DeferUntil or DeadLetter; Extend and KeepAlive renew
// the lease meanwhile. Every settle takes the claim's token: after the
// lease expired and the item went to another worker, each returns an error
// matching ErrFenced and changes nothing.
type Claim struct {
	c *Client

	ID          string
	Type        string
	Class       priority.Class
	Tenant      string
	Payload     json.RawMessage
	Attempt     int
	MaxAttempts int
	Token       string
	// LeaseExpiresAt is the lease's expiry at claim time; Expires reports
	// it as renewed since.
	LeaseExpiresAt time.Time

	mu      sync.Mutex
	expires time.Time
}

// Expires returns the lease's expiry as last reported by the engine.
func (cl *Claim) Expires() time.Time {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.expires.IsZero() {
		return cl.LeaseExpiresAt
	}
	return cl.expires
}

type tokenBody struct {
	Token string `json:"token"`
}

// Ack acknowledges the item: it is done.
func (cl *Claim) Ack(ctx context.Context) error {
	return cl.c.call(ctx, "ack", tokenBody{cl.Token}, nil, 0)
}

// RetryResult is the outcome of a Retry.
type RetryResult struct {
	// Dead is true when that was the last attempt: the item is a dead letter.
	Dead bool
	// NextAt is when the item becomes claimable again (zero when Dead).
	NextAt time.Time
}

// Retry gives the item back after a failure; it consumes an attempt, the
// engine delays the next claim, and the last attempt dead-letters it.
func (cl *Claim) Retry(ctx context.Context, errText string) (RetryResult, error) {
	var out struct {
		Dead   bool   `json:"dead"`
		NextAt string `json:"next_at"`
	}
	if err := cl.c.call(ctx, "retry", struct {
		Token string `json:"token"`
		Error string `json:"error,omitempty"`
	}{cl.Token, errText}, &out, 0); err != nil {
		return RetryResult{}, err
	}
	r := RetryResult{Dead: out.Dead}
	if out.NextAt != "" {
		t, err := time.Parse(time.RFC3339, out.NextAt)
		if err != nil {
			return r, fmt.Errorf("%w: next_at %q", ErrBackend, out.NextAt)
		}
		r.NextAt = t
	}
	return r, nil
}

type deferBody struct {
	Token   string `json:"token"`
	Until   string `json:"until,omitempty"`
	DelayMS *int64 `json:"delay_ms,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func (cl *Claim) deferBody(ctx context.Context, b deferBody) (time.Time, error) {
	var out struct {
		NextAt string `json:"next_at"`
	}
	if err := cl.c.call(ctx, "defer", b, &out, 0); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, out.NextAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: next_at %q", ErrBackend, out.NextAt)
	}
	return t, nil
}

// Defer puts the item back for delay without consuming an attempt and
// returns when it becomes claimable again. The delay is relative, so the
// worker's clock does not matter.
func (cl *Claim) Defer(ctx context.Context, delay time.Duration, reason string) (time.Time, error) {
	ms := max(delay, 0).Milliseconds()
	return cl.deferBody(ctx, deferBody{Token: cl.Token, DelayMS: &ms, Reason: reason})
}

// DeferUntil puts the item back until t without consuming an attempt.
func (cl *Claim) DeferUntil(ctx context.Context, t time.Time, reason string) (time.Time, error) {
	return cl.deferBody(ctx, deferBody{Token: cl.Token, Until: t.UTC().Format(time.RFC3339Nano), Reason: reason})
}

// Extend renews the lease for lease (zero: the client's Lease; the engine
// caps it at its AckWait) and returns the new expiry.
func (cl *Claim) Extend(ctx context.Context, lease time.Duration) (time.Time, error) {
	if lease <= 0 {
		lease = cl.c.cfg.Lease
	}
	var out struct {
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	if err := cl.c.call(ctx, "extend", struct {
		Token        string  `json:"token"`
		LeaseSeconds float64 `json:"lease_seconds,omitempty"`
	}{cl.Token, lease.Seconds()}, &out, 0); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, out.LeaseExpiresAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: lease_expires_at %q", ErrBackend, out.LeaseExpiresAt)
	}
	cl.mu.Lock()
	cl.expires = t
	cl.mu.Unlock()
	return t, nil
}

// DeadLetter moves the item to the dead letters with reason.
func (cl *Claim) DeadLetter(ctx context.Context, reason string) error {
	return cl.c.call(ctx, "dead", struct {
		Token  string `json:"token"`
		Reason string `json:"reason"`
	}{cl.Token, reason}, nil, 0)
}

// KeepAlive extends the lease every interval (zero: a third of the lease)
// until ctx is done, on the caller's goroutine. It returns ctx.Err() when
// ctx ends, or the first error of an extend (ErrFenced when the lease was
// lost: stop working on the item).
func (cl *Claim) KeepAlive(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = cl.c.cfg.Lease / 3
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := cl.Extend(ctx, 0); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
		}
	}
}

package workitems

import (
	"context"
	"encoding/json"
	"errors"
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

// ErrAckNextWait is returned by AckNext for a ClaimRequest with a Wait:
// an ack with a next claim does not long-poll.
var ErrAckNextWait = errors.New("workitems: AckNext does not long-poll: ClaimRequest.Wait must be zero")

// NextError is AckNext's error when the ack succeeded but the next claim
// was not made: Err is why, as Claim would have returned it (a *PacedError
// while the class is paced, or the engine's error for the claim). The
// acknowledged item is settled either way; do not ack it again.
type NextError struct {
	Err error
}

// Error returns "workitems: acked; next claim: <Err>".
func (e *NextError) Error() string { return "workitems: acked; next claim: " + e.Err.Error() }

// Unwrap returns Err, so IsBusyShed reports a paced next claim.
func (e *NextError) Unwrap() error { return e.Err }

type ackBody struct {
	Token string     `json:"token"`
	Next  *claimBody `json:"next,omitempty"`
}

type ackReply struct {
	Next      *claimReply `json:"next"`
	NextError *struct {
		Code int    `json:"code"`
		Text string `json:"text"`
	} `json:"next_error"`
}

// AckNext acknowledges the item and claims the next one r allows in the
// same engine request, as JetStream's "+NXT" does for a pull consumer: a
// worker loop then costs one engine round trip per item instead of two.
// It returns the next claim, or (nil, nil) when there is nothing to claim.
//
// The errors tell the two halves apart. A *NextError (errors.As) means the
// ack was done and only the next claim failed. Any other error is the
// ack's, exactly as Ack would return it: a refusal (shed, fenced, bad
// token) did nothing, and after a timeout the ack may or may not have been
// done (acking again then answers ErrFenced if it was).
// r.Wait must be zero (ErrAckNextWait). The next claim is paced like Claim,
// by the class of ctx: while that class is paced AckNext acks alone and
// returns a *NextError wrapping the *PacedError, and a shed answer (the
// engine shed the whole request, so nothing was acked) opens the window.
func (cl *Claim) AckNext(ctx context.Context, r ClaimRequest) (*Claim, error) {
	c := cl.c
	if r.Wait != 0 {
		return nil, ErrAckNextWait
	}
	cls := priority.From(ctx)
	if perr := c.pacer.RaiseIfPaced(cls); perr != nil {
		if err := cl.Ack(ctx); err != nil {
			return nil, err
		}
		return nil, &NextError{Err: perr}
	}
	body := c.claimBody(r)
	var rep ackReply
	if err := c.call(ctx, "ack", ackBody{Token: cl.Token, Next: &body}, &rep, 0); err != nil {
		if IsBusyShed(err) {
			c.pacer.RecordShed(cls)
		}
		return nil, err
	}
	c.pacer.RecordAdmitted(cls)
	switch {
	case rep.NextError != nil:
		return nil, &NextError{Err: &EngineError{Op: "claim", Code: rep.NextError.Code, Text: rep.NextError.Text}}
	case rep.Next == nil:
		return nil, &NextError{Err: fmt.Errorf("%w: ack reply without next or next_error", ErrBackend)}
	}
	next, err := claimFromReply(*rep.Next)
	if err != nil {
		return nil, &NextError{Err: err}
	}
	if next != nil {
		next.c = c
	}
	return next, nil
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

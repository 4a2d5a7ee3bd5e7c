package workitems

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edictrt/edict/scheduler"
)

// ClaimTask implements scheduler.Claimer: Claim with f's filter, the claim
// returned as a *scheduler.Task whose Token settles it.
func (c *Client) ClaimTask(ctx context.Context, f scheduler.ClaimFilter) (*scheduler.Task, error) {
	cl, err := c.Claim(ctx, ClaimRequest{Worker: f.Worker, Classes: f.Classes, Lanes: f.Lanes, Types: f.Types, Lease: f.Lease})
	if err != nil || cl == nil {
		return nil, err
	}
	return &scheduler.Task{
		ID: cl.ID, Type: cl.Type, Class: cl.Class, Tenant: cl.Tenant, Payload: cl.Payload,
		Attempt: cl.Attempt, MaxAttempts: cl.MaxAttempts, LeaseExpiresAt: cl.LeaseExpiresAt, Token: cl.Token,
	}, nil
}

// Pending implements scheduler.Claimer: the ready items per lane from the
// engine's stats.
func (c *Client) Pending(ctx context.Context) (map[string]int, error) {
	s, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(s.Lanes))
	for lane, l := range s.Lanes {
		out[lane] = l.Queued
	}
	return out, nil
}

// claimOf rebuilds a Claim around a task's token.
func (c *Client) claimOf(t *scheduler.Task) (*Claim, error) {
	if t == nil || t.Token == "" {
		return nil, fmt.Errorf("workitems: task without a token")
	}
	return &Claim{c: c, ID: t.ID, Type: t.Type, Class: t.Class, Tenant: t.Tenant, Payload: t.Payload,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Token: t.Token, LeaseExpiresAt: t.LeaseExpiresAt, expires: t.LeaseExpiresAt}, nil
}

// Defer implements scheduler.Claimer: t back to ready after delay, no
// attempt consumed.
func (c *Client) Defer(ctx context.Context, t *scheduler.Task, delay time.Duration, reason string) error {
	cl, err := c.claimOf(t)
	if err != nil {
		return err
	}
	_, err = cl.Defer(ctx, delay, reason)
	return err
}

// Extend implements scheduler.Claimer: it renews t's lease for the
// client's Lease and updates t.LeaseExpiresAt.
func (c *Client) Extend(ctx context.Context, t *scheduler.Task) error {
	cl, err := c.claimOf(t)
	if err != nil {
		return err
	}
	exp, err := cl.Extend(ctx, 0)
	if err == nil {
		t.LeaseExpiresAt = exp
	}
	return err
}

// Settle implements scheduler.Claimer: nil acks t, an error wrapping
// scheduler.ErrDeadLetter dead-letters it with the error's text as reason,
// any other error retries it.
func (c *Client) Settle(ctx context.Context, t *scheduler.Task, result error) error {
	cl, err := c.claimOf(t)
	if err != nil {
		return err
	}
	switch {
	case result == nil:
		return cl.Ack(ctx)
	case errors.Is(result, scheduler.ErrDeadLetter):
		return cl.DeadLetter(ctx, truncate(result.Error(), 1024))
	default:
		_, err := cl.Retry(ctx, truncate(result.Error(), 4096))
		return err
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

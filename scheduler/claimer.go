package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/edictrt/edict/priority"
)

// ErrDeadLetter, wrapped in the error a task handler returns, asks the pool
// to dead-letter the item at once instead of retrying it.
var ErrDeadLetter = errors.New("scheduler: dead-letter this item")

// ClaimFilter selects the work a claim may return. The three filters combine
// with AND; an empty filter matches everything.
type ClaimFilter struct {
	// Worker identifies the claiming worker.
	Worker string
	// Classes, when non-empty, limits the claim to these classes; the
	// highest class with ready work is served first.
	Classes []priority.Class
	// Lanes, when non-empty, limits the claim to task types of these lanes.
	Lanes []string
	// Types, when non-empty, limits the claim to these task types.
	Types []string
	// Lease is the lease to ask for; zero means the claimer's default (60 s).
	Lease time.Duration
}

// Task is one claimed work item.
type Task struct {
	ID             string
	Type           string
	Class          priority.Class
	Tenant         string
	Payload        json.RawMessage
	Attempt        int
	MaxAttempts    int
	LeaseExpiresAt time.Time
	// Token is the claimer's opaque handle for settling the task; it fences
	// a worker whose lease expired.
	Token string
}

// Claimer is the work source a [Pool] drives. workitems.Client satisfies it.
//
// ClaimTask returns (nil, nil) when there is nothing to claim. Errors from the
// engine that start with "BUSY:" are sheds; the pool backs off on any error.
// Every method runs under ctx and returns ctx.Err() once it is done.
type Claimer interface {
	// ClaimTask claims the next item matching f, highest class first.
	ClaimTask(ctx context.Context, f ClaimFilter) (*Task, error)
	// Pending returns the number of ready items per lane, for Policy.Decide.
	Pending(ctx context.Context) (map[string]int, error)
	// Defer puts t back to ready after delay without consuming an attempt.
	Defer(ctx context.Context, t *Task, delay time.Duration, reason string) error
	// Extend renews t's lease.
	Extend(ctx context.Context, t *Task) error
	// Settle records the outcome of running t: nil acknowledges it; an
	// error wrapping ErrDeadLetter dead-letters it; any other error retries
	// it (consuming an attempt; the last attempt dead-letters).
	Settle(ctx context.Context, t *Task, result error) error
}

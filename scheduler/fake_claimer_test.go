package scheduler

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/edictrt/edict/priority"
)

// fakeClaimer is an in-memory Claimer: a ready list served highest class
// first, recording every call.
type fakeClaimer struct {
	mu       sync.Mutex
	ready    []*Task
	claims   []claimCall
	deferred []deferCall
	settled  map[string]error
	extends  map[string][]time.Time
	// claimHook, when set, runs before each claim outside the lock; a
	// non-nil task it returns is claimed instead.
	claimHook func(ctx context.Context, f ClaimFilter) *Task
	// pendingErr, when set, is Pending's error.
	pendingErr error
}

type claimCall struct {
	at     time.Time
	class  priority.Class // the claim ctx's class
	filter ClaimFilter
}

type deferCall struct {
	id     string
	delay  time.Duration
	reason string
}

func newFakeClaimer(tasks ...*Task) *fakeClaimer {
	return &fakeClaimer{ready: tasks, settled: map[string]error{}, extends: map[string][]time.Time{}}
}

func task(id, typ string) *Task {
	return &Task{ID: id, Type: typ, Class: priority.ForTaskType(typ), Attempt: 1, MaxAttempts: 3, Token: "tok-" + id}
}

func matches(t *Task, f ClaimFilter) bool {
	if len(f.Classes) > 0 && !slices.Contains(f.Classes, t.Class) {
		return false
	}
	if len(f.Lanes) > 0 && !slices.Contains(f.Lanes, priority.LaneOf(t.Type)) {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, t.Type)
}

func (c *fakeClaimer) ClaimTask(ctx context.Context, f ClaimFilter) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.claims = append(c.claims, claimCall{time.Now(), priority.From(ctx), f})
	hook := c.claimHook
	c.mu.Unlock()
	if hook != nil {
		if t := hook(ctx, f); t != nil {
			return t, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for i, t := range c.ready {
		if matches(t, f) && (best < 0 || t.Class.Higher(c.ready[best].Class)) {
			best = i
		}
	}
	if best < 0 {
		return nil, nil
	}
	t := c.ready[best]
	c.ready = slices.Delete(c.ready, best, best+1)
	return t, nil
}

func (c *fakeClaimer) Pending(ctx context.Context) (map[string]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pendingErr != nil {
		return nil, c.pendingErr
	}
	m := map[string]int{}
	for _, t := range c.ready {
		m[priority.LaneOf(t.Type)]++
	}
	return m, nil
}

func (c *fakeClaimer) Defer(ctx context.Context, t *Task, delay time.Duration, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deferred = append(c.deferred, deferCall{t.ID, delay, reason})
	return nil
}

func (c *fakeClaimer) Extend(ctx context.Context, t *Task) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.extends[t.ID] = append(c.extends[t.ID], time.Now())
	return nil
}

func (c *fakeClaimer) Settle(ctx context.Context, t *Task, result error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled[t.ID] = result
	return nil
}

func (c *fakeClaimer) snapshot() (claims []claimCall, deferred []deferCall, settled map[string]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := make(map[string]error, len(c.settled))
	for k, v := range c.settled {
		s[k] = v
	}
	return slices.Clone(c.claims), slices.Clone(c.deferred), s
}

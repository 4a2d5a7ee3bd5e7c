package llmgate

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/edictrt/edict/priority"
)

// Map calls fn for every item, each call holding a slot of g taken with the
// class of ctx (read once: an untagged fan-out goes through the gate as
// Orchestration), and returns the results in the order of items. At most
// min(g.Capacity(), len(items)) calls run at once; with one (or a single
// item) they run inline, one after another. The first error, from fn or
// from waiting for a slot, cancels the context the other calls get, and Map
// returns it, with nil results, once every started call has returned. No
// goroutine outlives the call. Empty items give an empty result.
func Map[T, R any](ctx context.Context, g *Gate, items []T, fn func(context.Context, T) (R, error)) ([]R, error) {
	out := make([]R, len(items))
	if len(items) == 0 {
		return out, nil
	}
	c := priority.From(ctx)
	one := func(ctx context.Context, i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := g.acquire(ctx, c); err != nil {
			return err
		}
		defer g.Release()
		r, err := fn(ctx, items[i])
		out[i] = r
		return err
	}
	width := min(g.Capacity(), len(items))
	if width <= 1 {
		for i := range items {
			if err := one(ctx, i); err != nil {
				return nil, err
			}
		}
		return out, nil
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		once  sync.Once
		first error
	)
	for range width {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					return
				}
				if err := one(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

package workitems_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/scheduler"
	"github.com/edictrt/edict/workitems"
)

// TestPoolEndToEnd drives a real scheduler.Pool with the client against the
// engine: every item runs once under its class, the interactive floor holds
// (background never occupies the reserved worker), the poison item is
// dead-lettered, and a task longer than its lease keeps it alive.
func TestPoolEndToEnd(t *testing.T) {
	e := startEngine(t, work.Config{Lease: time.Second}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{Lease: time.Second})
	ctx := reqCtx(t)
	items := map[string]string{
		"q1": "conversation", "q2": "kg_memory", "q3": "conversation",
		"h1": "skill_workflows",
		"b1": "document", "b2": "document", "b3": "diff", "b4": "feed_ingest",
		"long":   "deep_analysis",
		"poison": "enrichment_backfill",
	}
	for id, typ := range items {
		if _, err := c.Submit(ctx, workitems.Item{ID: id, Type: typ}); err != nil {
			t.Fatal(err)
		}
	}
	const workers = 3
	var (
		mu        sync.Mutex
		runs      = map[string]int{}
		bad       []string
		bgRunning atomic.Int32
		bgMax     atomic.Int32
		done      = make(chan struct{})
		remaining = len(items)
	)
	handler := func(ctx context.Context, task *scheduler.Task) error {
		if got, want := priority.From(ctx), priority.ForTaskType(task.Type); got != want {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s ran as %v, want %v", task.ID, got, want))
			mu.Unlock()
		}
		if task.Attempt != 1 {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s attempt %d", task.ID, task.Attempt))
			mu.Unlock()
		}
		if !task.Class.High() {
			n := bgRunning.Add(1)
			defer bgRunning.Add(-1)
			for {
				m := bgMax.Load()
				if n <= m || bgMax.CompareAndSwap(m, n) {
					break
				}
			}
		}
		var err error
		switch task.ID {
		case "long":
			// 2.5 leases: only the pool's heartbeat keeps it.
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		case "poison":
			err = fmt.Errorf("bad input: %w", scheduler.ErrDeadLetter)
		}
		mu.Lock()
		runs[task.ID]++
		remaining--
		if remaining == 0 {
			close(done)
		}
		mu.Unlock()
		return err
	}
	pool, err := scheduler.NewPool(scheduler.PoolConfig{
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Workers:   workers,
		Claimer:   c,
		Policy:    scheduler.NewPolicy(scheduler.PolicyConfig{Workers: workers, Reserved: 1, PerLaneMin: 1, Shards: 1}, nil),
		Handler:   handler,
		Lease:     time.Second,
		Heartbeat: 250 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(runCtx) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // named deadline: ten items, a denied item's 5–15 s delay and an idle worker's backoff (≤ 18.75 s)
		st, serr := c.Stats(context.Background())
		mu.Lock()
		t.Fatalf("pool did not finish; ran %v; pool %+v; engine %+v %v", runs, pool.Stats(), st, serr)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
	for id := range items {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times", id, runs[id])
		}
	}
	if m := bgMax.Load(); m > workers-1 {
		t.Errorf("%d background tasks ran at once; the interactive floor allows %d", m, workers-1)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for cls, s := range st.Classes {
		if s.Queued != 0 || s.InFlight != 0 {
			t.Errorf("class %s left %+v", cls, s)
		}
	}
	if d := st.Classes["background_ingestion"].Dead; d != 1 {
		t.Errorf("dead = %d, want the poison item", d)
	}
	dead, _, err := c.DeadList(ctx, 0, "", 0)
	if err != nil || len(dead) != 1 || dead[0].ID != "poison" {
		t.Errorf("dead letters = %+v, %v", dead, err)
	}
	if s := pool.Stats(); s.Claimed != int64(len(items)) {
		t.Errorf("pool stats = %+v", s)
	}
}

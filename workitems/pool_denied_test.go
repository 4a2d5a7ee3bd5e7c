package workitems_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/scheduler"
	"github.com/edictrt/edict/workitems"
)

// deferCall is one Defer the pool made, seen by deferWatch.
type deferCall struct {
	id, reason string
	attempt    int
	delay      time.Duration
	start      time.Time
	err        error
}

// deferWatch is the real client; it reports every Defer the pool makes on
// calls after forwarding it to the engine.
type deferWatch struct {
	*workitems.Client
	calls chan deferCall
}

func (w *deferWatch) Defer(ctx context.Context, t *scheduler.Task, delay time.Duration, reason string) error {
	start := time.Now()
	err := w.Client.Defer(ctx, t, delay, reason)
	w.calls <- deferCall{id: t.ID, reason: reason, attempt: t.Attempt, delay: delay, start: start, err: err}
	return err
}

// TestPoolDeniedItemDeferredWithoutAttempt runs a real scheduler.Pool over
// the engine with a policy that certainly denies a background item: a
// two-worker policy whose registry already holds a task running elsewhere,
// so the interactive floor (1) refuses it. The pool defers it with reason
// admission_denied for exactly DeferMin (Rand is 0); the engine records the
// defer durably and keeps the item queued; once the other task finishes the
// item comes back after the delay and runs with Attempt still 1, and its
// max_attempts of 1 proves the defer consumed nothing (a consumed attempt
// would have dead-lettered it with lease_exhausted).
func TestPoolDeniedItemDeferredWithoutAttempt(t *testing.T) {
	e := startEngine(t, work.Config{Lease: 2 * time.Second}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{Lease: 2 * time.Second})
	ctx := reqCtx(t)
	if _, err := c.Submit(ctx, workitems.Item{ID: "b1", Type: "document", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	reg := scheduler.NewRegistry()
	reg.Start("elsewhere", priority.LaneQueries, "conversation")
	policy := scheduler.NewPolicy(scheduler.PolicyConfig{Workers: 2, Reserved: 1, PerLaneMin: 1, Shards: 1}, reg)
	if d := policy.Decide(priority.LaneIngestion, "document", map[string]int{priority.LaneIngestion: 1}); d.Admit {
		t.Fatalf("setup: policy admits the background item: %+v", d)
	}
	watch := &deferWatch{Client: c, calls: make(chan deferCall, 4)}
	type run struct {
		task  scheduler.Task
		class priority.Class
		at    time.Time
	}
	runs := make(chan run, 4)
	pool, err := scheduler.NewPool(scheduler.PoolConfig{
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Workers: 1,
		Claimer: watch,
		Policy:  policy,
		Rand:    func() float64 { return 0 },
		Handler: func(ctx context.Context, task *scheduler.Task) error {
			runs <- run{task: *task, class: priority.From(ctx), at: time.Now()}
			return nil
		},
		Lease:     2 * time.Second,
		Heartbeat: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(runCtx) }()
	stopPool := sync.OnceValue(func() error { stop(); return <-ran })
	defer stopPool()

	var d deferCall
	select {
	case d = <-watch.calls:
	case r := <-runs:
		t.Fatalf("%s ran while the interactive floor should refuse it", r.task.ID)
	case <-time.After(5 * time.Second): // named deadline: the first poll claims at once
		t.Fatalf("no defer; pool %+v", pool.Stats())
	}
	if d.err != nil {
		t.Fatalf("defer: %v", d.err)
	}
	if d.id != "b1" || d.reason != scheduler.DeferReason || d.delay != scheduler.DeferMin || d.attempt != 1 {
		t.Fatalf("defer = %+v, want b1 attempt 1 for %v with reason %q", d, scheduler.DeferMin, scheduler.DeferReason)
	}
	// The engine holds the defer durably: the record counts it and the
	// item is queued, not in flight.
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, work.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := kv.Get(ctx, "item.b1")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Defers uint64 `json:"defers"`
		State  string `json:"state"`
	}
	if err := json.Unmarshal(ent.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Defers != 1 || rec.State != "queued" {
		t.Fatalf("engine record after the defer = %s", ent.Value())
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bg := st.Classes[priority.BackgroundIngestion.String()]; bg.Queued != 1 || bg.InFlight != 0 {
		t.Fatalf("background stats after the defer = %+v", bg)
	}
	// The other task finishes: the floor no longer refuses the item.
	reg.Finish("elsewhere")

	var r run
	select {
	case r = <-runs:
	case d := <-watch.calls:
		t.Fatalf("deferred again: %+v", d)
	case <-time.After(15 * time.Second): // named deadline: the 5 s defer, then the idle backoff (1+2+4 s) reaches it
		t.Fatalf("deferred item never came back; pool %+v", pool.Stats())
	}
	if r.task.ID != "b1" || r.task.Attempt != 1 || r.task.MaxAttempts != 1 {
		t.Errorf("ran %s attempt %d of %d, want b1 attempt 1 of 1", r.task.ID, r.task.Attempt, r.task.MaxAttempts)
	}
	if r.class != priority.BackgroundIngestion {
		t.Errorf("ran under %v, want background_ingestion", r.class)
	}
	if waited := r.at.Sub(d.start); waited < scheduler.DeferMin {
		t.Errorf("came back after %v, before the %v defer delay", waited, scheduler.DeferMin)
	}
	if err := stopPool(); err != nil {
		t.Fatal(err)
	}
	if s := pool.Stats(); s.Denied != 1 || s.Claimed != 1 {
		t.Errorf("pool stats = %+v, want one denial and one run", s)
	}
	st, err = c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for cls, s := range st.Classes {
		if s.Queued != 0 || s.InFlight != 0 || s.Dead != 0 {
			t.Errorf("class %s left %+v", cls, s)
		}
	}
}

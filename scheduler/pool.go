package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/edictrt/edict/priority"
)

// Constants of the worker loop (spec §6).
const (
	// DefaultLease is the task lease a claim asks for.
	DefaultLease = 60 * time.Second
	// DefaultHeartbeat is how often a running task's lease is extended.
	DefaultHeartbeat = 20 * time.Second
	// DeferMin and DeferMax bound the jittered delay of a denied item.
	DeferMin = 5 * time.Second
	DeferMax = 15 * time.Second
	// IdleMax is the cap of the idle backoff curve, and its floor while
	// background should yield to foreground work.
	IdleMax = 15 * time.Second
	// DeferReason is the reason a denied item is deferred with.
	DeferReason = "admission_denied"

	settleTimeout = 10 * time.Second
	idleInitial   = time.Second
)

// PoolConfig configures a [Pool]. Claimer and Handler are required; every
// other zero field is its documented default.
type PoolConfig struct {
	// Workers is the number of worker goroutines. Zero means the policy's
	// worker count (1 without a policy).
	Workers int
	// Claimer is the work source. Required.
	Claimer Claimer
	// Policy decides admission. Nil means NewPolicy with Workers workers,
	// Reserved 1 and PerLaneMin 1 over a new registry.
	Policy *Policy
	// Handler runs one task. Its ctx carries the task's class
	// (priority.ForTaskType) and the lane's soft timeout, and is cancelled
	// when Run's ctx is. A nil result acknowledges the item, an error
	// wrapping [ErrDeadLetter] dead-letters it, any other error retries it.
	// Required.
	Handler func(ctx context.Context, t *Task) error
	// Throttle, when set, makes idle workers back off at least IdleMax while
	// foreground work is active. Nil means no throttle.
	Throttle *Throttle
	// WorkerID is the base of the worker identities; worker i claims as
	// "<WorkerID>-<i>". Empty means "worker:<32 hex random>".
	WorkerID string
	// Lease is the task lease claims ask for. Zero means 60 s.
	Lease time.Duration
	// Heartbeat is how often a running task's lease is extended. Zero
	// means 20 s.
	Heartbeat time.Duration
	// Rand returns uniform numbers in [0, 1) for the jitter of denied-item
	// delays and idle backoff. Nil means math/rand/v2. It must be safe for
	// concurrent use.
	Rand func() float64
	// Logger receives claim and settle failures. Nil discards them.
	Logger *slog.Logger
	// MeterProvider provides the pool's metrics. Nil means no-op.
	MeterProvider metric.MeterProvider
	// TracerProvider provides a span per task. Nil means no-op.
	TracerProvider trace.TracerProvider
}

// PoolStats counts the outcomes of the pool's polls since it was created.
type PoolStats struct {
	// Claimed counts items admitted and run.
	Claimed int64
	// Empty counts polls that found nothing to claim.
	Empty int64
	// Denied counts items the policy refused and the pool deferred.
	Denied int64
	// GateSkipped counts polls skipped because another worker held the
	// claim gate.
	GateSkipped int64
	// Errors counts polls that failed.
	Errors int64
}

// Pool runs a fixed number of workers that claim, admit and run tasks.
// Create it with [NewPool] and start it with [Pool.Run].
type Pool struct {
	workers   int
	claimer   Claimer
	policy    *Policy
	handler   func(context.Context, *Task) error
	throttle  *Throttle
	base      string
	lease     time.Duration
	heartbeat time.Duration
	rand      func() float64
	log       *slog.Logger
	tracer    trace.Tracer

	polls    metric.Int64Counter
	tasks    metric.Int64Counter
	duration metric.Float64Histogram

	// gate is the process-wide claim gate: one claim at a time, and a
	// worker that finds it held skips its poll instead of waiting.
	gate sync.Mutex

	claimed, empty, denied, gateSkipped, errs atomic.Int64
}

// NewPool returns a pool for cfg.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Claimer == nil {
		return nil, ErrNoClaimer
	}
	if cfg.Handler == nil {
		return nil, ErrNoHandler
	}
	p := &Pool{
		workers:   cfg.Workers,
		claimer:   cfg.Claimer,
		policy:    cfg.Policy,
		handler:   cfg.Handler,
		throttle:  cfg.Throttle,
		base:      cfg.WorkerID,
		lease:     cfg.Lease,
		heartbeat: cfg.Heartbeat,
		rand:      cfg.Rand,
		log:       cfg.Logger,
	}
	if p.workers <= 0 {
		p.workers = 1
		if p.policy != nil {
			p.workers = p.policy.Workers()
		}
	}
	if p.policy == nil {
		p.policy = NewPolicy(PolicyConfig{Workers: p.workers, Reserved: 1, PerLaneMin: 1}, nil)
	}
	if p.base == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		p.base = "worker:" + hex.EncodeToString(b[:])
	}
	if p.lease <= 0 {
		p.lease = DefaultLease
	}
	if p.heartbeat <= 0 {
		p.heartbeat = DefaultHeartbeat
	}
	if p.rand == nil {
		p.rand = randv2.Float64
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	const scope = "github.com/edictrt/edict/scheduler"
	p.tracer = tp.Tracer(scope)
	m := mp.Meter(scope)
	var err error
	if p.polls, err = m.Int64Counter("edict_scheduler_polls_total",
		metric.WithDescription("Worker polls by outcome (claimed, empty, denied, gate_skipped, error).")); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if p.tasks, err = m.Int64Counter("edict_scheduler_tasks_total",
		metric.WithDescription("Tasks run, by class and result (ok, error).")); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if p.duration, err = m.Float64Histogram("edict_scheduler_task_seconds", metric.WithUnit("s"),
		metric.WithDescription("Task run time, by class.")); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return p, nil
}

// Policy returns the pool's admission policy.
func (p *Pool) Policy() *Policy { return p.policy }

// Stats returns the poll counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Claimed:     p.claimed.Load(),
		Empty:       p.empty.Load(),
		Denied:      p.denied.Load(),
		GateSkipped: p.gateSkipped.Load(),
		Errors:      p.errs.Load(),
	}
}

// Run runs the workers until ctx is done, then returns nil after every
// worker has finished its current task (whose ctx is cancelled too) and
// settled it. A task interrupted by the cancellation is deferred back to
// ready without consuming an attempt. Run is meant to be called once.
func (p *Pool) Run(ctx context.Context) error {
	ctx = priority.With(ctx, priority.BackgroundIngestion)
	var wg sync.WaitGroup
	for i := range p.workers {
		wg.Go(func() { p.worker(ctx, i) })
	}
	wg.Wait()
	return nil
}

// hydrationWorker reports whether worker i is hydration-reserved: the first
// min(max(1, reserved), wc−1) workers when wc > 1.
func (p *Pool) hydrationWorker(i int) bool {
	if p.workers <= 1 {
		return false
	}
	return i < min(max(1, p.policy.reserved), p.workers-1)
}

func (p *Pool) worker(ctx context.Context, i int) {
	id := p.base + "-" + strconv.Itoa(i)
	reserved := p.hydrationWorker(i)
	idle := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(idleInitial),
		backoff.WithMultiplier(2),
		backoff.WithMaxInterval(IdleMax),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	)
	for poll := 0; ctx.Err() == nil; poll++ {
		// A single worker alternates: polls 0, 2, 4, … are hydration-first.
		hydrationFirst := reserved || (p.workers == 1 && poll%2 == 0)
		if p.poll(ctx, id, hydrationFirst) {
			idle.Reset()
			continue
		}
		sleep(ctx, p.idleDelay(idle.NextBackOff()))
	}
}

// idleDelay returns b + U(0, 0.25·b), at least IdleMax while foreground work
// is active.
func (p *Pool) idleDelay(b time.Duration) time.Duration {
	d := b + time.Duration(p.rand()*0.25*float64(b))
	if p.throttle != nil && p.throttle.Active() {
		d = max(d, IdleMax)
	}
	return d
}

// deferDelay returns U(5, 15) s.
func (p *Pool) deferDelay() time.Duration {
	return DeferMin + time.Duration(p.rand()*float64(DeferMax-DeferMin))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (p *Pool) outcome(ctx context.Context, c *atomic.Int64, name string) {
	c.Add(1)
	p.polls.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", name)))
}

// poll runs one claim attempt and, when a task is admitted, the task. It
// reports whether a task ran.
func (p *Pool) poll(ctx context.Context, id string, hydrationFirst bool) bool {
	if !p.gate.TryLock() {
		p.outcome(ctx, &p.gateSkipped, "gate_skipped")
		return false
	}
	t, lane, ok := p.claimAndAdmit(ctx, id, hydrationFirst)
	p.gate.Unlock()
	if !ok {
		return false
	}
	p.outcome(ctx, &p.claimed, "claimed")
	p.run(ctx, id, lane, t)
	return true
}

// claimAndAdmit claims one item and decides its admission; a denied item is
// deferred. On success the worker is recorded in the registry.
func (p *Pool) claimAndAdmit(ctx context.Context, id string, hydrationFirst bool) (*Task, string, bool) {
	t, hydrated, err := p.claim(ctx, id, hydrationFirst)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("scheduler: claim failed", "worker", id, "err", err)
			p.outcome(ctx, &p.errs, "error")
		}
		return nil, "", false
	}
	if t == nil {
		p.outcome(ctx, &p.empty, "empty")
		return nil, "", false
	}
	lane := priority.LaneOf(t.Type)
	if hydrated {
		// Only the hydration-filtered claim skips the policy.
		p.policy.reg.Start(id, lane, t.Type)
		return t, lane, true
	}
	pending, err := p.claimer.Pending(ctx)
	if err != nil {
		p.log.Debug("scheduler: pending counts failed", "worker", id, "err", err)
		pending = nil
	}
	// The item in hand is pending work of its lane. Ready counts no longer
	// include it once claimed, and without it a lone item in an otherwise
	// idle lane never makes its lane "uncovered": a one-worker pool would
	// then keep its hot spare forever and defer that item again and again,
	// starving background work to zero.
	withSelf := make(map[string]int, len(pending)+1)
	for l, n := range pending {
		withSelf[l] = n
	}
	withSelf[lane]++
	d := p.policy.admit(id, lane, t.Type, withSelf)
	if d.Admit {
		return t, lane, true
	}
	p.outcome(ctx, &p.denied, "denied")
	p.log.Debug("scheduler: admission denied", "worker", id, "item", t.ID, "type", t.Type, "reason", d.Reason)
	dctx, cancel := detached(ctx)
	defer cancel()
	if err := p.claimer.Defer(dctx, t, p.deferDelay(), DeferReason); err != nil {
		p.log.Warn("scheduler: defer of a denied item failed", "item", t.ID, "err", err)
	}
	return nil, "", false
}

var highClasses = []priority.Class{priority.Interactive, priority.Orchestration, priority.Hydration}

// claim runs the claim sequence of spec §6: hydration types first when asked
// (under Hydration), then the high classes (under Interactive), then
// background (under BackgroundIngestion). hydrated reports a claim of the
// hydration-filtered step.
func (p *Pool) claim(ctx context.Context, id string, hydrationFirst bool) (t *Task, hydrated bool, err error) {
	var hydErr error
	if hydrationFirst {
		hctx := priority.With(ctx, priority.Hydration)
		for _, typ := range priority.HydrationTypes { // sorted: capability_hydration, skill_workflows
			t, err := p.claimer.ClaimTask(hctx, ClaimFilter{
				Worker: id, Lanes: []string{priority.LaneOf(typ)}, Types: []string{typ}, Lease: p.lease,
			})
			if err != nil {
				hydErr = err
				break
			}
			if t != nil {
				return t, true, nil
			}
		}
	}
	t, err = p.claimer.ClaimTask(priority.With(ctx, priority.Interactive),
		ClaimFilter{Worker: id, Classes: highClasses, Lease: p.lease})
	if err != nil || t != nil {
		return t, false, err
	}
	t, err = p.claimer.ClaimTask(priority.With(ctx, priority.BackgroundIngestion),
		ClaimFilter{Worker: id, Classes: []priority.Class{priority.BackgroundIngestion}, Lease: p.lease})
	if err == nil && t == nil {
		err = hydErr
	}
	return t, false, err
}

// run runs an admitted task under its class and its lane's soft timeout,
// keeps its lease alive and settles it.
func (p *Pool) run(ctx context.Context, id, lane string, t *Task) {
	defer p.policy.reg.Finish(id)
	class := priority.ForTaskType(t.Type)
	attrs := metric.WithAttributes(attribute.String("class", class.String()))
	tctx, cancel := context.WithTimeout(priority.With(ctx, class), priority.SoftTimeout(lane))
	defer cancel()
	tctx, span := p.tracer.Start(tctx, "scheduler.task", trace.WithAttributes(
		priority.Attribute(class),
		attribute.String("edict.task.type", t.Type),
		attribute.String("edict.task.id", t.ID),
		attribute.String("edict.task.lane", lane),
	))
	defer span.End()

	stop := p.keepAlive(ctx, t)
	start := time.Now()
	err := p.call(tctx, t)
	stop()
	p.duration.Record(ctx, time.Since(start).Seconds(), attrs)
	result := "ok"
	if err != nil {
		result = "error"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	p.tasks.Add(ctx, 1, attrs, metric.WithAttributes(attribute.String("result", result)))
	p.settle(ctx, t, err)
}

// call runs the handler, turning a panic into an error wrapping ErrTaskPanic.
func (p *Pool) call(ctx context.Context, t *Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", ErrTaskPanic, v)
		}
	}()
	return p.handler(ctx, t)
}

// keepAlive extends t's lease every heartbeat until the returned stop is
// called; stop waits for the goroutine.
func (p *Pool) keepAlive(ctx context.Context, t *Task) (stop func()) {
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(p.heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-tick.C:
				if err := p.claimer.Extend(kctx, t); err != nil && kctx.Err() == nil {
					p.log.Warn("scheduler: lease extend failed", "item", t.ID, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// settle records the task's outcome. When Run's ctx ended the task, the
// item is deferred back to ready at once without consuming an attempt.
func (p *Pool) settle(ctx context.Context, t *Task, result error) {
	if ctx.Err() != nil && result != nil && !errors.Is(result, ErrDeadLetter) {
		dctx, cancel := detached(ctx)
		defer cancel()
		if err := p.claimer.Defer(dctx, t, 0, "shutdown"); err != nil {
			p.log.Warn("scheduler: defer at shutdown failed", "item", t.ID, "err", err)
		}
		return
	}
	sctx, cancel := detached(ctx)
	defer cancel()
	if err := p.claimer.Settle(sctx, t, result); err != nil {
		p.log.Warn("scheduler: settle failed", "item", t.ID, "err", err)
	}
}

// detached returns a context that outlives ctx's cancellation by at most
// settleTimeout, for the bookkeeping that must follow a claim.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

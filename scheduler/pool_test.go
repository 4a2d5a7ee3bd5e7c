package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edictrt/edict/priority"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

// runPool starts p.Run and returns a stop that cancels it and waits.
func runPool(t *testing.T, cfg PoolConfig) (*Pool, func()) {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	return p, func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func TestNewPoolNeedsClaimerAndHandler(t *testing.T) {
	h := func(context.Context, *Task) error { return nil }
	if _, err := NewPool(PoolConfig{Handler: h}); !errors.Is(err, ErrNoClaimer) {
		t.Errorf("NewPool without claimer = %v", err)
	}
	if _, err := NewPool(PoolConfig{Claimer: newFakeClaimer()}); !errors.Is(err, ErrNoHandler) {
		t.Errorf("NewPool without handler = %v", err)
	}
}

func TestPoolRunsTasksUnderTheirClassAndSoftTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			class    priority.Class
			deadline time.Duration
		}
		var mu sync.Mutex
		got := map[string]seen{}
		start := time.Now()
		c := newFakeClaimer(task("doc", "document"), task("chat", "conversation"), task("skill", "skill_workflows"))
		_, stop := runPool(t, PoolConfig{
			Workers: 4, Claimer: c, Rand: constRand(0),
			Policy: NewPolicy(PolicyConfig{Workers: 4, Reserved: 1, PerLaneMin: 0}, nil),
			Handler: func(ctx context.Context, tk *Task) error {
				dl, _ := ctx.Deadline()
				mu.Lock()
				got[tk.ID] = seen{priority.From(ctx), dl.Sub(start)}
				mu.Unlock()
				return nil
			},
		})
		synctest.Wait()
		stop()
		want := map[string]seen{
			"doc":   {priority.BackgroundIngestion, 3600 * time.Second},
			"chat":  {priority.Interactive, 120 * time.Second},
			"skill": {priority.Hydration, 3600 * time.Second},
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
			t.Errorf("tasks (-want +got):\n%s", diff)
		}
		_, _, settled := c.snapshot()
		if diff := cmp.Diff(map[string]error{"doc": nil, "chat": nil, "skill": nil}, settled); diff != "" {
			t.Errorf("settled (-want +got):\n%s", diff)
		}
	})
}

func TestPoolClaimsPerClassBandAndSingleWorkerAlternates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer()
		_, stop := runPool(t, PoolConfig{
			Workers: 1, Claimer: c, Rand: constRand(0), WorkerID: "w",
			Handler: func(context.Context, *Task) error { return nil },
		})
		synctest.Wait()             // poll 0
		time.Sleep(time.Second)     // idle backoff 1 s
		synctest.Wait()             // poll 1
		time.Sleep(2 * time.Second) // idle backoff 2 s
		synctest.Wait()             // poll 2
		stop()
		claims, _, _ := c.snapshot()
		type call struct {
			Class   priority.Class
			Classes []priority.Class
			Lanes   []string
			Types   []string
		}
		var got []call
		for _, cl := range claims {
			if cl.filter.Worker != "w-0" || cl.filter.Lease != DefaultLease {
				t.Errorf("claim filter %+v: want worker w-0, lease 60s", cl.filter)
			}
			got = append(got, call{cl.class, cl.filter.Classes, cl.filter.Lanes, cl.filter.Types})
		}
		hyd := []call{
			{priority.Hydration, nil, []string{"connectors"}, []string{"capability_hydration"}},
			{priority.Hydration, nil, []string{"ingestion"}, []string{"skill_workflows"}},
		}
		bands := []call{
			{priority.Interactive, highClasses, nil, nil},
			{priority.BackgroundIngestion, []priority.Class{priority.BackgroundIngestion}, nil, nil},
		}
		want := slices.Concat(hyd, bands, bands, hyd, bands)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("claims (-want +got):\n%s", diff)
		}
	})
}

func TestPoolHydrationReservedWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer()
		_, stop := runPool(t, PoolConfig{
			Workers: 4, Claimer: c, Rand: constRand(0), WorkerID: "w",
			Policy:  NewPolicy(PolicyConfig{Workers: 4, Reserved: 2, PerLaneMin: 1}, nil),
			Handler: func(context.Context, *Task) error { return nil },
		})
		// A poll that finds the claim gate held backs off: give every worker
		// a minute of fake time (several polls) so none is missed.
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		claims, _, _ := c.snapshot()
		hydrationFirst := map[string]bool{}
		for _, cl := range claims {
			if len(cl.filter.Types) > 0 {
				hydrationFirst[cl.filter.Worker] = true
			}
		}
		// min(max(1, reserved), wc-1) = 2 reserved workers, on every poll.
		if diff := cmp.Diff(map[string]bool{"w-0": true, "w-1": true}, hydrationFirst); diff != "" {
			t.Errorf("hydration-first workers (-want +got):\n%s", diff)
		}
	})
}

func TestPoolDefersDeniedItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("doc", "document"))
		ran := false
		// Two workers, one busy elsewhere: the last free worker is the
		// interactive floor, so the document task is refused.
		reg := NewRegistry()
		reg.Start("elsewhere", "research", "background_research")
		p, stop := runPool(t, PoolConfig{
			Workers: 1, Claimer: c, Rand: constRand(0.25),
			Policy:  NewPolicy(PolicyConfig{Workers: 2, Reserved: 1, PerLaneMin: 1}, reg),
			Handler: func(context.Context, *Task) error { ran = true; return nil },
		})
		synctest.Wait()
		stop()
		_, deferred, settled := c.snapshot()
		if diff := cmp.Diff([]deferCall{{"doc", 7500 * time.Millisecond, "admission_denied"}}, deferred, cmp.AllowUnexported(deferCall{})); diff != "" {
			t.Errorf("deferred (-want +got):\n%s", diff)
		}
		if ran || len(settled) != 0 {
			t.Errorf("denied item ran (%v) or was settled (%v)", ran, settled)
		}
		if n := p.Policy().Registry().Running(); n != 1 {
			t.Errorf("registry holds %d tasks after a denial, want only the one elsewhere", n)
		}
		if s := p.Stats(); s.Denied != 1 || s.Claimed != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestPoolDeferJitterRange(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 5 * time.Second}, {0.5, 10 * time.Second}, {0.999999, 14999990 * time.Microsecond}} {
		p, err := NewPool(PoolConfig{Claimer: newFakeClaimer(), Handler: func(context.Context, *Task) error { return nil }, Rand: constRand(tc.u)})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.deferDelay(); got != tc.want {
			t.Errorf("deferDelay(U=%v) = %v, want %v", tc.u, got, tc.want)
		}
	}
}

func TestHydrationReservedFallbackIsChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := NewRegistry()
		reg.Start("elsewhere", "research", "background_research")
		policy := NewPolicy(PolicyConfig{Workers: 2, Reserved: 1, PerLaneMin: 1}, reg)
		// Only the hydration-reserved worker w-0 gets work: a hydration item
		// from its filtered claim, then a connectors item from its fallback.
		items := []*Task{task("hyd", "capability_hydration"), task("cs", "connector_sync")}
		c := newFakeClaimer()
		c.claimHook = func(ctx context.Context, f ClaimFilter) *Task {
			c.mu.Lock()
			defer c.mu.Unlock()
			if f.Worker != "w-0" || len(items) == 0 {
				return nil
			}
			if matches(items[0], f) {
				t := items[0]
				items = items[1:]
				return t
			}
			return nil
		}
		var ran []string
		_, stop := runPool(t, PoolConfig{
			Workers: 2, Claimer: c, Policy: policy, Rand: constRand(0), WorkerID: "w",
			Handler: func(_ context.Context, tk *Task) error { ran = append(ran, tk.ID); return nil },
		})
		// A poll that finds the claim gate held (by w-1) backs off: a minute
		// of fake time gives w-0 several polls.
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		// The floor (1) is held by the task running elsewhere: the
		// hydration-filtered claim skips the policy, the fallback does not.
		if diff := cmp.Diff([]string{"hyd"}, ran); diff != "" {
			t.Errorf("ran (-want +got):\n%s", diff)
		}
		_, deferred, _ := c.snapshot()
		if len(deferred) != 1 || deferred[0].id != "cs" || deferred[0].reason != DeferReason {
			t.Errorf("deferred %+v, want cs with %q", deferred, DeferReason)
		}
		if d := policy.Decide("connectors", "connector_sync", nil); d.Reason != "reserve interactive (1)" {
			t.Errorf("the fallback's decision would be %+v", d)
		}
	})
}

func TestPoolIdleBackoff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		foreground bool
		want       []time.Duration
	}{
		// b = 1, 2, 4, 8, 15, 15, … plus U(0, 0.25·b) with U = 0.2 → +5 %.
		{"curve", false, []time.Duration{1050, 2100, 4200, 8400, 15750, 15750, 15750}},
		// While foreground is active the delay is at least 15 s.
		{"foreground", true, []time.Duration{15000, 15000, 15000, 15000, 15750, 15750}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				th := NewThrottle(ThrottleConfig{})
				if tc.foreground {
					defer th.Foreground(t.Context())()
				}
				c := newFakeClaimer()
				_, stop := runPool(t, PoolConfig{
					Workers: 1, Claimer: c, Rand: constRand(0.2), Throttle: th,
					Handler: func(context.Context, *Task) error { return nil },
				})
				for _, d := range tc.want {
					time.Sleep(d * time.Millisecond)
				}
				synctest.Wait()
				stop()
				claims, _, _ := c.snapshot()
				var polls []time.Time
				for _, cl := range claims {
					if cl.class == priority.Interactive {
						polls = append(polls, cl.at)
					}
				}
				var gaps []time.Duration
				for i := 1; i < len(polls); i++ {
					gaps = append(gaps, polls[i].Sub(polls[i-1])/time.Millisecond)
				}
				if diff := cmp.Diff(tc.want, gaps); diff != "" {
					t.Errorf("idle gaps in ms (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestPoolBackoffResetsAfterWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer()
		p, stop := runPool(t, PoolConfig{
			Workers: 1, Claimer: c, Rand: constRand(0),
			Policy:  NewPolicy(PolicyConfig{Workers: 1, Reserved: 0, PerLaneMin: 0}, nil),
			Handler: func(context.Context, *Task) error { return nil },
		})
		time.Sleep(7 * time.Second) // polls at 0, 1, 3, 7
		synctest.Wait()
		c.mu.Lock()
		c.ready = append(c.ready, task("doc", "document"))
		c.mu.Unlock()
		time.Sleep(8 * time.Second) // poll at 15 claims the item
		synctest.Wait()
		before, _, _ := c.snapshot()
		time.Sleep(time.Second) // the next poll comes after 1 s again
		synctest.Wait()
		if after, _, _ := c.snapshot(); len(after) == len(before) {
			t.Errorf("no poll 1 s after a task ran: backoff not reset")
		}
		stop()
		if s := p.Stats(); s.Claimed != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestPoolExtendsLeaseOfLongTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("long", "document"))
		start := time.Now()
		_, stop := runPool(t, PoolConfig{
			Workers: 2, Claimer: c, Rand: constRand(0),
			Policy: NewPolicy(PolicyConfig{Workers: 2, Reserved: 0, PerLaneMin: 0}, nil),
			Handler: func(ctx context.Context, _ *Task) error {
				time.Sleep(65 * time.Second)
				return nil
			},
		})
		time.Sleep(70 * time.Second)
		synctest.Wait()
		stop()
		c.mu.Lock()
		defer c.mu.Unlock()
		var at []time.Duration
		for _, e := range c.extends["long"] {
			at = append(at, e.Sub(start))
		}
		if diff := cmp.Diff([]time.Duration{20 * time.Second, 40 * time.Second, 60 * time.Second}, at); diff != "" {
			t.Errorf("extends (-want +got):\n%s", diff)
		}
		if err, ok := c.settled["long"]; !ok || err != nil {
			t.Errorf("settled %v, %v", err, ok)
		}
	})
}

func TestPoolSoftTimeoutAndHandlerErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("slow", "feed_ingest"), task("boom", "diff"), task("dead", "deep_extract"))
		c.pendingErr = errors.New("no lane counts: nothing steers")
		start := time.Now()
		var ended time.Duration
		_, stop := runPool(t, PoolConfig{
			Workers: 4, Claimer: c, Rand: constRand(0),
			Policy: NewPolicy(PolicyConfig{Workers: 4, Reserved: 0, PerLaneMin: 0}, nil),
			Handler: func(ctx context.Context, tk *Task) error {
				switch tk.ID {
				case "slow":
					<-ctx.Done()
					ended = time.Since(start)
					return ctx.Err()
				case "boom":
					panic("kaboom")
				}
				return ErrDeadLetter
			},
		})
		time.Sleep(301 * time.Second)
		synctest.Wait()
		stop()
		_, _, settled := c.snapshot()
		if ended != 300*time.Second || !errors.Is(settled["slow"], context.DeadlineExceeded) {
			t.Errorf("slow task ended at %v, settled %v; want the worldview soft timeout 300s", ended, settled["slow"])
		}
		if !errors.Is(settled["boom"], ErrTaskPanic) {
			t.Errorf("panicking task settled %v", settled["boom"])
		}
		if !errors.Is(settled["dead"], ErrDeadLetter) {
			t.Errorf("dead-letter task settled %v", settled["dead"])
		}
	})
}

func TestPoolGateSkipsPollWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		c := newFakeClaimer()
		c.claimHook = func(ctx context.Context, f ClaimFilter) *Task {
			blocked := false
			once.Do(func() { blocked = true })
			if blocked {
				select { // the first claim holds the gate
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}
		p, stop := runPool(t, PoolConfig{
			Workers: 2, Claimer: c, Rand: constRand(0),
			Handler: func(context.Context, *Task) error { return nil },
		})
		synctest.Wait()
		if s := p.Stats(); s.GateSkipped != 1 {
			t.Errorf("stats %+v, want one gate_skipped poll", s)
		}
		close(release)
		synctest.Wait()
		stop()
	})
}

func TestPoolStopDefersInterruptedTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("doc", "document"), task("quick", "conversation"))
		started := make(chan struct{})
		_, stop := runPool(t, PoolConfig{
			Workers: 3, Claimer: c, Rand: constRand(0),
			Policy: NewPolicy(PolicyConfig{Workers: 3, Reserved: 0, PerLaneMin: 0}, nil),
			Handler: func(ctx context.Context, tk *Task) error {
				if tk.ID == "quick" {
					return nil
				}
				close(started)
				<-ctx.Done()
				return ctx.Err()
			},
		})
		select {
		case <-started:
		case <-time.After(time.Hour):
			t.Fatal("the background task never started")
		}
		synctest.Wait()
		stop() // returns only after the worker finished its task
		_, deferred, settled := c.snapshot()
		if diff := cmp.Diff([]deferCall{{"doc", 0, "shutdown"}}, deferred, cmp.AllowUnexported(deferCall{})); diff != "" {
			t.Errorf("deferred (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]error{"quick": nil}, settled); diff != "" {
			t.Errorf("settled (-want +got):\n%s", diff)
		}
	})
}

func TestPoolPendingErrorStillDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("chat", "conversation"))
		c.pendingErr = errors.New("stats unavailable")
		_, stop := runPool(t, PoolConfig{
			Workers: 1, Claimer: c, Rand: constRand(0),
			Handler: func(context.Context, *Task) error { return nil },
		})
		synctest.Wait()
		stop()
		if _, _, settled := c.snapshot(); len(settled) != 1 {
			t.Errorf("settled %v, want the interactive task", settled)
		}
	})
}

// TestPoolRunsLoneBackgroundItemOnOneWorker: with the defaults (one worker,
// reserved 1) a lone background item still runs: the item in hand counts as
// pending work of its lane, so the lane is uncovered and the hot-spare rule
// does not starve background work to zero.
func TestPoolRunsLoneBackgroundItemOnOneWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeClaimer(task("doc", "document"))
		_, stop := runPool(t, PoolConfig{
			Workers: 1, Claimer: c, Rand: constRand(0),
			Handler: func(context.Context, *Task) error { return nil },
		})
		synctest.Wait()
		stop()
		_, deferred, settled := c.snapshot()
		if len(deferred) != 0 || len(settled) != 1 {
			t.Errorf("deferred %v, settled %v; want the lone document task run", deferred, settled)
		}
	})
}

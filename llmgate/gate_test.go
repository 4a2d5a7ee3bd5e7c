package llmgate

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edictrt/edict/priority"
)

const (
	bgc  = priority.BackgroundIngestion
	inte = priority.Interactive
	orch = priority.Orchestration
	hydr = priority.Hydration
)

func countAdmitted(calls []*call) int {
	n := 0
	for _, c := range calls {
		if c.admitted() {
			n++
		}
	}
	return n
}

func TestHighLandsWhileBackgroundSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 8}) // reserve 3, background ceiling 5
		var bgs []*call
		for range 20 {
			bgs = append(bgs, start(g, bgc))
		}
		synctest.Wait()
		if n := countAdmitted(bgs); n != 5 {
			t.Fatalf("background admitted = %d, want 5", n)
		}
		for i, c := range []priority.Class{inte, orch, hydr} {
			if !g.TryAcquire(with(c)) {
				t.Fatalf("high call %d (%v) refused with background saturating", i, c)
			}
		}
		h := start(g, inte)
		synctest.Wait()
		s := g.Stats()
		if h.admitted() || s.InFlight != 8 || s.Waiting.Of(inte) != 1 || s.Waiting.Of(bgc) != 15 {
			t.Fatalf("stats = %+v, want 8 in flight, 1 interactive and 15 background waiting", s)
		}
		g.Release() // frees a slot: the interactive waiter gets it, not background
		synctest.Wait()
		if !h.admitted() || countAdmitted(bgs) != 5 {
			t.Fatalf("after release: interactive admitted %v, background %d; want true, 5", h.admitted(), countAdmitted(bgs))
		}
		drain(t, g, bgs)
	})
}

// drain releases slots until every call is admitted and everything is
// released, then checks that nobody is left waiting.
func drain(t *testing.T, g *Gate, calls []*call) {
	t.Helper()
	for g.Stats().InFlight > 0 {
		g.Release()
		synctest.Wait()
	}
	for _, c := range calls {
		if over, _ := c.finished(); !over {
			t.Fatalf("a %v call still waits after everything was released", c.class)
		}
	}
	if s := g.Stats(); s.Waiting.Total() != 0 || s.InFlight != 0 {
		t.Fatalf("after drain: %+v", s)
	}
}

func TestBackgroundYieldsToWaitingHigh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 2}) // reserve 1, background ceiling 1
		if !g.TryAcquire(with(bgc)) || !g.TryAcquire(with(orch)) {
			t.Fatal("setup: acquisitions refused")
		}
		h := start(g, inte)
		synctest.Wait()
		b := start(g, bgc)
		synctest.Wait()
		if g.TryAcquire(with(bgc)) {
			t.Fatal("background admitted while a high call waits")
		}
		g.Release() // 1 in flight: the high waiter takes the slot
		synctest.Wait()
		if !h.admitted() || b.admitted() {
			t.Fatalf("high admitted %v, background admitted %v; want true, false", h.admitted(), b.admitted())
		}
		g.Release() // 1 in flight, ceiling 1: background still waits
		synctest.Wait()
		if b.admitted() {
			t.Fatal("background admitted at its ceiling")
		}
		g.Release() // 0 in flight
		synctest.Wait()
		if !b.admitted() {
			t.Fatal("background not admitted below its ceiling with no high waiter")
		}
		drain(t, g, []*call{h, b})
	})
}

func TestFIFOWithinTierHighFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 1})
		if !g.TryAcquire(with(bgc)) { // capacity 1: reserve 0, background may take it
			t.Fatal("setup")
		}
		var order []*call
		for _, c := range []priority.Class{bgc, bgc, hydr, inte, bgc, orch} {
			order = append(order, start(g, c))
			synctest.Wait()
		}
		want := []int{2, 3, 5, 0, 1, 4} // high FIFO, then background FIFO
		for k := range want {
			g.Release()
			synctest.Wait()
			for j, c := range order {
				if got, exp := c.admitted(), contains(want[:k+1], j); got != exp {
					t.Fatalf("after release %d: call %d (%v) admitted = %v, want %v", k, j, c.class, got, exp)
				}
			}
		}
		g.Release()
	})
}

func contains(s []int, v int) bool { return index(s, v) >= 0 }

func index(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestGrantedSlotNotStolen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 1})
		g.TryAcquire(with(inte))
		w := start(g, bgc)
		synctest.Wait()
		g.Release() // grants to w before w runs
		if g.TryAcquire(with(inte)) {
			t.Fatal("a newcomer took the slot granted to a waiter")
		}
		synctest.Wait()
		if !w.admitted() {
			t.Fatal("waiter lost its slot")
		}
		g.Release()
	})
}

func TestNewcomerDoesNotOvertakeParkedBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 4, QuietWindow: time.Second}) // ceiling 3, busy 1
		g.TryAcquire(with(inte))
		g.Release()
		if !g.TryAcquire(with(bgc)) {
			t.Fatal("setup")
		}
		w := start(g, bgc)
		synctest.Wait()
		if w.admitted() {
			t.Fatal("background admitted above its busy ceiling")
		}
		time.Sleep(time.Second) // the window ends: w is re-evaluated
		synctest.Wait()
		if !w.admitted() {
			t.Fatal("parked background not admitted when the quiet window ended")
		}
		g.Release()
		g.Release()
	})
}

func TestCancelLeavesGateUnchanged(t *testing.T) {
	for _, c := range []priority.Class{inte, bgc} {
		t.Run(c.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGate(t, Config{Capacity: 2, Reserve: NoReserve})
				g.TryAcquire(with(orch))
				g.TryAcquire(with(orch))
				before := g.Stats()
				ctx, cancel := context.WithTimeout(with(c), 5*time.Second)
				defer cancel()
				t0 := time.Now()
				err := g.Acquire(ctx)
				if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 5*time.Second {
					t.Fatalf("Acquire = %v after %v, want deadline exceeded after 5s", err, time.Since(t0))
				}
				after := g.Stats()
				before.Cancelled[c.Order()]++
				if after != before {
					t.Fatalf("stats after cancel = %+v, want %+v", after, before)
				}
				g.Release()
				g.Release()
			})
		})
	}
}

func TestAcquireDoneContext(t *testing.T) {
	g := newGate(t, Config{Capacity: 1})
	ctx, cancel := context.WithCancel(with(inte))
	cancel()
	if err := g.Acquire(ctx); err != nil { // a free slot is taken even so, as x/sync/semaphore does
		t.Fatalf("Acquire with a free slot = %v", err)
	}
	if err := g.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on a full gate with a done context = %v, want canceled", err)
	}
	if s := g.Stats(); s.Waiting.Total() != 0 || s.Cancelled.Of(inte) != 1 || s.InFlight != 1 {
		t.Fatalf("stats = %+v", s)
	}
	g.Release()
}

// A cancellation racing a grant hands the slot on: the waiter is stopped
// between queueing and waiting, granted and cancelled, then let go to see
// both at once. Whichever way its select goes, no slot leaks and the
// background waiter behind is admitted when it should be. Repeated so that
// both ways are taken.
func TestCancelRacingGrant(t *testing.T) {
	var gaveBack, kept int
	for range 64 {
		synctest.Test(t, func(t *testing.T) {
			g := newGate(t, Config{Capacity: 2}) // reserve 1, background ceiling 1
			g.beforeWait = holdBeforeWait
			fill(g, inte)
			hold := make(chan struct{})
			h := startHeld(g, inte, hold)
			synctest.Wait()
			b := start(g, bgc)
			defer b.cancel()
			synctest.Wait()
			g.Release() // 1 in flight + h's grant
			h.cancel()
			g.Release() // h's slot only: b stays parked while h holds it
			close(hold)
			synctest.Wait()
			over, err := h.finished()
			switch {
			case !over:
				t.Fatal("high waiter neither admitted nor cancelled")
			case err == nil: // admitted: it holds the only slot counted
				kept++
				if b.admitted() || g.Stats().InFlight != 1 {
					t.Fatalf("h admitted: background admitted %v, stats %+v", b.admitted(), g.Stats())
				}
				g.Release()
				synctest.Wait()
			case errors.Is(err, context.Canceled): // gave the slot back: b got it
				gaveBack++
				if s := g.Stats(); s.Admitted.Of(inte) != 2 || s.Cancelled.Of(inte) != 1 {
					t.Fatalf("h cancelled: stats %+v", s)
				}
			default:
				t.Fatalf("Acquire = %v", err)
			}
			if !b.admitted() || g.Stats().InFlight != 1 {
				t.Fatalf("background admitted %v, stats %+v; want admitted with 1 in flight", b.admitted(), g.Stats())
			}
			g.Release()
		})
	}
	if gaveBack == 0 || kept == 0 {
		t.Logf("race outcomes: %d gave back, %d kept (one way not taken this run)", gaveBack, kept)
	}
}

// A cancelled high waiter leaves the queue and the high-waiter count: the
// reference kept the count at 1 after such a waiter left and stalled
// background with nothing in flight. (With hand-off a high caller waits only
// at full capacity, so the cancellation admits background only in the
// give-back race, TestCancelRacingGrant.)
func TestCancelledHighWaiterDoesNotStallBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 2}) // reserve 1, background ceiling 1
		fill(g, inte)
		h := start(g, inte)
		synctest.Wait()
		b := start(g, bgc)
		synctest.Wait()
		h.cancel()
		synctest.Wait()
		if over, err := h.finished(); !over || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled high waiter: over %v err %v", over, err)
		}
		if s := g.Stats(); s.Waiting.High() != 0 || s.Waiting.Of(bgc) != 1 {
			t.Fatalf("after cancel: %+v", s)
		}
		g.Release()
		synctest.Wait()
		if b.admitted() {
			t.Fatal("background admitted at its ceiling")
		}
		g.Release()
		synctest.Wait()
		if !b.admitted() {
			t.Fatal("background stalled after the high waiter left")
		}
		g.Release()
	})
}

func TestResize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 4}) // reserve 1, ceiling 3
		fill(g, orch)
		h := start(g, inte)
		synctest.Wait()
		b := start(g, bgc)
		synctest.Wait()
		g.resize(8) // reserve 3, ceiling 5: h takes the 5th slot; 5 in flight, b waits
		synctest.Wait()
		if !h.admitted() || b.admitted() || g.Reserve() != 3 {
			t.Fatalf("after growing to 8: high %v background %v reserve %d", h.admitted(), b.admitted(), g.Reserve())
		}
		g.resize(2) // reserve 1: 5 in flight stay counted, nobody admitted
		if g.TryAcquire(with(inte)) {
			t.Fatal("admitted above a shrunk capacity")
		}
		releaseN(g, 4) // 1 in flight, ceiling 1
		synctest.Wait()
		if b.admitted() {
			t.Fatal("background admitted at its ceiling after the shrink")
		}
		g.Release()
		synctest.Wait()
		if !b.admitted() {
			t.Fatal("background not admitted once in flight fell below its ceiling")
		}
		g.Release()
	})
}

func TestReleasePanicsWhenNothingHeld(t *testing.T) {
	g := newGate(t, Config{Capacity: 2})
	g.TryAcquire(with(inte))
	g.Release()
	defer func() {
		if r := recover(); r != errOverRelease {
			t.Fatalf("recover() = %v, want %v", r, errOverRelease)
		}
		if s := g.Stats(); s.InFlight != 0 {
			t.Fatalf("in flight = %d after a bad release", s.InFlight)
		}
	}()
	g.Release()
}

func TestQuietWindowCeilings(t *testing.T) {
	tests := []struct{ capacity, quiet, busy int }{
		{2, 1, 1}, {3, 2, 1}, {4, 3, 1}, {8, 5, 2}, {16, 11, 5}, {32, 21, 10},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			g := newGate(t, Config{Capacity: tt.capacity, QuietWindow: 30 * time.Second})
			if n := fill(g, bgc); n != tt.quiet {
				t.Errorf("capacity %d: fresh gate admits %d background, want %d", tt.capacity, n, tt.quiet)
			}
			releaseN(g, tt.quiet)
			g.TryAcquire(with(inte))
			g.Release()
			if n := fill(g, bgc); n != tt.busy {
				t.Errorf("capacity %d: within the window %d background, want %d", tt.capacity, n, tt.busy)
			}
			releaseN(g, tt.busy)
			time.Sleep(30*time.Second - time.Nanosecond)
			if n := fill(g, bgc); n != tt.busy {
				t.Errorf("capacity %d: 1ns before the window ends %d background, want %d", tt.capacity, n, tt.busy)
			}
			releaseN(g, tt.busy)
			time.Sleep(time.Nanosecond)
			if n := fill(g, bgc); n != tt.quiet {
				t.Errorf("capacity %d: after the window %d background, want %d", tt.capacity, n, tt.quiet)
			}
			releaseN(g, tt.quiet)
		})
	}
}

func TestWithoutWindowCeilingIgnoresHighTraffic(t *testing.T) {
	g := newGate(t, Config{Capacity: 8})
	g.TryAcquire(with(inte))
	g.Release()
	if n := fill(g, bgc); n != 5 {
		t.Fatalf("background admitted = %d, want 5 (capacity-reserve)", n)
	}
	if n := fill(g, inte); n != 3 {
		t.Fatalf("high admitted on top = %d, want 3", n)
	}
	releaseN(g, 8)
}

// fill takes slots for class c until the gate refuses, and returns how many.
func fill(g *Gate, c priority.Class) int {
	n := 0
	for g.TryAcquire(with(c)) {
		n++
	}
	return n
}

func releaseN(g *Gate, n int) {
	for range n {
		g.Release()
	}
}

func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 3})
		fill(g, hydr)
		w := start(g, bgc)
		synctest.Wait()
		s := g.Stats()
		want := Stats{Capacity: 3, Reserve: 1, InFlight: 3}
		want.Waiting[bgc.Order()] = 1
		want.Admitted[hydr.Order()] = 3
		if s != want {
			t.Fatalf("stats = %+v, want %+v", s, want)
		}
		if s.Admitted.High() != 3 || s.Admitted.Total() != 3 {
			t.Fatalf("PerClass sums: high %d total %d", s.Admitted.High(), s.Admitted.Total())
		}
		w.cancel()
		synctest.Wait()
		releaseN(g, 3)
		if s := g.Stats(); s.Cancelled.Of(bgc) != 1 || s.InFlight != 0 || s.Waiting.Total() != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

func TestNewDefaults(t *testing.T) {
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Capacity() != 1 || g.Reserve() != 0 || g.model != DefaultModel {
		t.Fatalf("zero Config: capacity %d reserve %d model %q", g.Capacity(), g.Reserve(), g.model)
	}
	g = newGate(t, Config{Capacity: -3, Model: "Qwen"})
	if g.Capacity() != 1 || g.model != "Qwen" {
		t.Fatalf("capacity %d model %q", g.Capacity(), g.model)
	}
}

// TestStatsConcurrentWithAdmission: Stats may be called (a metrics scrape)
// while calls are admitted; -race checks the counters are read safely.
func TestStatsConcurrentWithAdmission(t *testing.T) {
	g, err := New(Config{Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := priority.With(t.Context(), priority.Interactive)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if err := g.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			g.Release()
		}
	}()
	for range 1000 {
		_ = g.Stats()
	}
	<-done
	if got := g.Stats().Admitted.Of(priority.Interactive); got != 1000 {
		t.Fatalf("admitted %d interactive calls, want 1000", got)
	}
}

package workitems_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

func TestBackoffCurve(t *testing.T) {
	p := workitems.DefaultPacingPolicy()
	p.Jitter = false
	want := []float64{0.25, 0.5, 1, 2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		got, err := p.Backoff(i+1, 0)
		if err != nil || got != time.Duration(w*float64(time.Second)) {
			t.Fatalf("Backoff(%d) = %v, %v; want %vs", i+1, got, err, w)
		}
	}
	if _, err := p.Backoff(0, 0); err == nil {
		t.Fatal("Backoff(0) succeeded")
	}
	for _, n := range []int{1024, 1025, 1 << 20, math.MaxInt} {
		if got, err := p.Backoff(n, 0.99); err != nil || got != 30*time.Second {
			t.Fatalf("Backoff(%d) = %v, %v", n, got, err)
		}
	}
}

func TestBackoffJitter(t *testing.T) {
	p := workitems.DefaultPacingPolicy()
	tests := []struct {
		attempt int
		u       float64
		want    time.Duration
	}{
		{1, 0, 125 * time.Millisecond},
		{1, 0.5, 187500 * time.Microsecond},
		{3, 0, 500 * time.Millisecond},
		{9, 0, 15 * time.Second},
	}
	for _, tt := range tests {
		if got, _ := p.Backoff(tt.attempt, tt.u); got != tt.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", tt.attempt, tt.u, got, tt.want)
		}
	}
	p.JitterKind = workitems.JitterAdditive
	if got, _ := p.Backoff(2, 0.5); got != 625*time.Millisecond {
		t.Errorf("additive Backoff(2, .5) = %v", got)
	}
	p.Strategy = workitems.StrategyLinear
	p.Jitter = false
	if got, _ := p.Backoff(3, 0); got != 750*time.Millisecond {
		t.Errorf("linear Backoff(3) = %v", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	mod := []func(*workitems.PacingPolicy){
		func(p *workitems.PacingPolicy) { p.MaxAttempts = 0 },
		func(p *workitems.PacingPolicy) { p.Base = -1 },
		func(p *workitems.PacingPolicy) { p.Max = -1 },
		func(p *workitems.PacingPolicy) { p.Factor = 0.5 },
		func(p *workitems.PacingPolicy) { p.Factor = math.NaN() },
		func(p *workitems.PacingPolicy) { p.Strategy = "fibonacci" },
		func(p *workitems.PacingPolicy) { p.JitterKind = "full" },
	}
	if err := workitems.DefaultPacingPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	for i, m := range mod {
		p := workitems.DefaultPacingPolicy()
		m(&p)
		if p.Validate() == nil {
			t.Errorf("case %d: %+v validated", i, p)
		}
		if _, err := workitems.NewPacer(p, nil, nil, nil); err == nil {
			t.Errorf("case %d: NewPacer accepted %+v", i, p)
		}
	}
}

func TestPacerWindowsPerClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := workitems.NewPacer(workitems.PacingPolicy{}, nil, func() float64 { return 0 }, nil)
		if err != nil {
			t.Fatal(err)
		}
		bg, in := priority.BackgroundIngestion, priority.Interactive
		if err := p.RaiseIfPaced(bg); err != nil {
			t.Fatalf("fresh pacer paced: %v", err)
		}
		if d := p.RecordShed(bg); d != 125*time.Millisecond {
			t.Fatalf("first shed window = %v", d)
		}
		err = p.RaiseIfPaced(bg)
		want := "BUSY: client-side claim pacing active for class 'background_ingestion', retry after 0.125s (engine not contacted)"
		if err == nil || err.Error() != want || !workitems.IsBusyShed(err) {
			t.Fatalf("RaiseIfPaced = %v, want %q", err, want)
		}
		var pe *workitems.PacedError
		if !errors.As(err, &pe) {
			t.Fatalf("%T is not a *PacedError", err)
		}
		if err := p.RaiseIfPaced(in); err != nil {
			t.Fatalf("interactive paced by background sheds: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		if got := p.Pending(bg, time.Now()); got != 25*time.Millisecond {
			t.Fatalf("Pending = %v", got)
		}
		time.Sleep(25 * time.Millisecond)
		if err := p.RaiseIfPaced(bg); err != nil {
			t.Fatalf("paced after the window: %v", err)
		}
		if d := p.RecordShed(bg); d != 250*time.Millisecond {
			t.Fatalf("second shed window = %v", d)
		}
		snap := p.Snapshot()
		if s := snap[bg]; s.ConsecutiveSheds != 2 || s.PacedRemaining != 250*time.Millisecond || len(snap) != 1 {
			t.Fatalf("Snapshot = %+v", snap)
		}
		p.RecordAdmitted(bg)
		if err := p.RaiseIfPaced(bg); err != nil || p.Snapshot()[bg].ConsecutiveSheds != 0 {
			t.Fatalf("admitted did not clear: %v %+v", err, p.Snapshot())
		}
		p.RecordShed(in)
		p.Reset()
		if len(p.Snapshot()) != 0 {
			t.Fatal("Reset kept state")
		}
	})
}

func TestPacerManySheds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := workitems.NewPacer(workitems.PacingPolicy{}, nil, func() float64 { return 0.999 }, nil)
		for i := range 5000 {
			d := p.RecordShed(priority.BackgroundIngestion)
			if d <= 0 || d > 30*time.Second {
				t.Fatalf("shed %d: window %v", i+1, d)
			}
		}
		if err := p.RaiseIfPaced(priority.BackgroundIngestion); !workitems.IsBusyShed(err) {
			t.Fatalf("after 5000 sheds: %v", err)
		}
	})
}

func TestPacerConcurrent(t *testing.T) {
	p, _ := workitems.NewPacer(workitems.PacingPolicy{}, nil, nil, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := priority.All[i%4]
			for range 200 {
				p.RecordShed(c)
				_ = p.RaiseIfPaced(c)
				p.RecordAdmitted(c)
			}
		})
	}
	wg.Wait()
	if n := len(p.Snapshot()); n != 4 {
		t.Fatalf("classes = %d", n)
	}
}

// Property: windows stay within the jittered bounds of the unjittered
// curve, for any shed count and jitter draw, and classes never interact.
func TestPacingProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3000).Draw(t, "sheds")
		u := rapid.Float64Range(0, 1).Draw(t, "u")
		p := workitems.DefaultPacingPolicy()
		got, err := p.Backoff(n, u)
		if err != nil {
			t.Fatal(err)
		}
		p.Jitter = false
		capped, _ := p.Backoff(n, 0)
		if got < capped/2 || got >= capped || capped > 30*time.Second {
			t.Fatalf("Backoff(%d, %v) = %v outside [%v, %v)", n, u, got, capped/2, capped)
		}
	})
}

func TestIsBusyShed(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&workitems.EngineError{Code: 503, Text: "BUSY: server at capacity, retry with backoff"}, true},
		{fmt.Errorf("wrapped: %w", &workitems.EngineError{Code: 503, Text: "BUSY: x"}), true},
		{&workitems.EngineError{Code: 503, Text: " BUSY: x"}, false},
		{&workitems.EngineError{Code: 503, Text: "busy: x"}, false},
		{&workitems.EngineError{Code: 400, Text: "BUSY: not a shed without 503"}, false},
		{&workitems.EngineError{Code: 409, Text: "FENCED: stale lease token"}, false},
		{errors.New("BUSY: a transport error with that text"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := workitems.IsBusyShed(tt.err); got != tt.want {
			t.Errorf("IsBusyShed(%v) = %v", tt.err, got)
		}
	}
	if !errors.Is(&workitems.EngineError{Code: 409, Text: "FENCED: stale lease token"}, workitems.ErrFenced) {
		t.Error("409 FENCED is not ErrFenced")
	}
}

package llmgate

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/edictrt/edict/priority"
)

// bubbleTB hides the *testing.T of a synctest bubble from rapid, which would
// otherwise call its Deadline (not allowed in a bubble).
type bubbleTB struct{ *testing.T }

// gateModel drives a gate from many goroutines and checks it at every step
// against an independent statement of the rules.
type gateModel struct {
	g        *Gate
	window   time.Duration
	held     int     // slots held by the test (admitted, not released)
	parked   []*call // Acquire calls not yet returned
	viol     []string
	lastHigh time.Time
	hadHigh  bool
}

// onGrant runs under the gate's lock at every grant.
func (m *gateModel) onGrant(e grantEvent) {
	now := time.Now()
	if e.active >= e.capacity {
		m.viol = append(m.viol, fmt.Sprintf("grant with %d in flight of %d", e.active, e.capacity))
	}
	if !e.class.High() {
		ceiling := e.capacity - e.reserve
		if m.window > 0 && m.hadHigh && now.Sub(m.lastHigh) < m.window {
			ceiling = max(1, ceiling/2)
		}
		if e.highWaiting > 0 {
			m.viol = append(m.viol, fmt.Sprintf("background grant with %d high waiting", e.highWaiting))
		}
		if e.active >= ceiling {
			m.viol = append(m.viol, fmt.Sprintf("background grant with %d in flight, ceiling %d", e.active, ceiling))
		}
	} else {
		m.lastHigh, m.hadHigh = now, true
	}
}

// ceiling is the model's background ceiling now.
func (m *gateModel) ceiling(s Stats) int {
	c := s.Capacity - s.Reserve
	if m.window > 0 && m.hadHigh && time.Since(m.lastHigh) < m.window {
		c = max(1, c/2)
	}
	return c
}

// settle waits for every goroutine to block and collects finished calls.
func (m *gateModel) settle() {
	synctest.Wait()
	kept := m.parked[:0]
	for _, c := range m.parked {
		over, err := c.finished()
		switch {
		case !over:
			kept = append(kept, c)
		case err == nil:
			m.held++
		}
	}
	m.parked = kept
}

func (m *gateModel) check(t *rapid.T) {
	m.g.mu.Lock()
	viol := m.viol
	m.g.mu.Unlock()
	if len(viol) > 0 {
		t.Fatalf("violations: %v", viol)
	}
	s := m.g.Stats()
	if s.InFlight != m.held {
		t.Fatalf("in flight %d, test holds %d", s.InFlight, m.held)
	}
	if int(s.Waiting.Total()) != len(m.parked) {
		t.Fatalf("waiting %d, parked calls %d", s.Waiting.Total(), len(m.parked))
	}
	// No lost wake-ups: nobody parked who the rules would admit now.
	if s.Waiting.High() > 0 && s.InFlight < s.Capacity {
		t.Fatalf("%d high waiting with %d of %d in flight", s.Waiting.High(), s.InFlight, s.Capacity)
	}
	if s.Waiting.High() == 0 && s.Waiting.Of(priority.BackgroundIngestion) > 0 &&
		s.InFlight < min(s.Capacity, m.ceiling(s)) {
		t.Fatalf("background waiting with %d in flight, ceiling %d", s.InFlight, m.ceiling(s))
	}
}

func TestAdmissionProperties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(bubbleTB{t}, runGateModel)
	})
}

func runGateModel(t *rapid.T) {
	capacity := rapid.IntRange(1, 8).Draw(t, "capacity")
	reserve := rapid.IntRange(-1, capacity).Draw(t, "reserve")
	window := rapid.SampledFrom([]time.Duration{0, 0, time.Second}).Draw(t, "window")
	g, err := build(Config{Capacity: capacity, Reserve: reserve, QuietWindow: window}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	m := &gateModel{g: g, window: window}
	g.onGrant = m.onGrant
	g.beforeWait = holdBeforeWait
	classes := priority.All[:]
	defer func() { // leave no goroutine behind, whatever happened
		for _, c := range m.parked {
			c.cancel()
		}
		m.settle()
		for ; m.held > 0; m.held-- {
			g.Release()
		}
	}()

	actions := map[string]func(*rapid.T){
		"acquire": func(t *rapid.T) {
			c := rapid.SampledFrom(classes).Draw(t, "class")
			m.parked = append(m.parked, start(g, c))
			m.settle()
		},
		"try": func(t *rapid.T) {
			if g.TryAcquire(with(rapid.SampledFrom(classes).Draw(t, "class"))) {
				m.held++
			}
		},
		"release": func(t *rapid.T) {
			if m.held == 0 {
				t.Skip("nothing held")
			}
			g.Release()
			m.held--
			m.settle()
		},
		"cancel": func(t *rapid.T) {
			if len(m.parked) == 0 {
				t.Skip("nobody waiting")
			}
			m.parked[rapid.IntRange(0, len(m.parked)-1).Draw(t, "which")].cancel()
			m.settle()
		},
		"resize": func(t *rapid.T) {
			g.resize(rapid.IntRange(1, 8).Draw(t, "capacity"))
			m.settle()
		},
		"": m.check,
	}
	if window > 0 {
		actions["sleep"] = func(t *rapid.T) {
			time.Sleep(time.Duration(rapid.IntRange(1, 12).Draw(t, "tenths")) * window / 10)
			m.settle()
		}
	} else {
		// A grant and a cancellation in the same instant: a new caller
		// queues, stops before waiting, is granted by a release and
		// cancelled, then sees both.
		actions["raceCancel"] = func(t *rapid.T) {
			hold := make(chan struct{})
			c := startHeld(g, rapid.SampledFrom(classes).Draw(t, "class"), hold)
			synctest.Wait()
			if over, _ := c.finished(); over {
				close(hold)
				m.parked = append(m.parked, c)
				m.settle()
				return
			}
			m.parked = append(m.parked, c)
			if m.held > 0 {
				g.Release()
				m.held--
			}
			c.cancel()
			close(hold)
			m.settle()
		}
	}
	t.Repeat(actions)

	// Release everything: every parked call is admitted in turn, and
	// nobody is left waiting.
	for m.held > 0 {
		g.Release()
		m.held--
		m.settle()
		m.check(t)
	}
	if len(m.parked) > 0 {
		t.Fatalf("%d calls still waiting after everything was released", len(m.parked))
	}
	if s := g.Stats(); s.InFlight != 0 || s.Waiting.Total() != 0 {
		t.Fatalf("after release: %+v", s)
	}
}

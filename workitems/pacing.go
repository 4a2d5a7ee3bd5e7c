package workitems

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/edictrt/edict/priority"
)

// Backoff strategies and jitter kinds of a PacingPolicy.
const (
	StrategyExponential = "exponential"
	StrategyLinear      = "linear"
	JitterProportional  = "proportional"
	JitterAdditive      = "additive"
)

// PacingPolicy is the claim-pacing backoff curve (orchestration spec §8).
// It is data, not an environment knob; DefaultPacingPolicy is the one to use.
type PacingPolicy struct {
	// Name names the policy in logs.
	Name string
	// MaxAttempts is validated (≥ 1) but unused by pacing.
	MaxAttempts int
	// Base is the first delay; Max caps every delay.
	Base, Max time.Duration
	// Factor is the exponential growth (≥ 1).
	Factor float64
	// Strategy is StrategyExponential (Base·Factor^(n−1)) or StrategyLinear (Base·n).
	Strategy string
	// Jitter turns jitter on; JitterKind is JitterProportional (the capped
	// delay times a factor in [0.5, 1.0)) or JitterAdditive (plus
	// U[0,1)·Base).
	Jitter     bool
	JitterKind string
}

// DefaultPacingPolicy returns the spec's policy: claim_pacing, base 0.25 s,
// factor 2, max 30 s, exponential, proportional jitter, max attempts 3.
func DefaultPacingPolicy() PacingPolicy {
	return PacingPolicy{
		Name:        "claim_pacing",
		MaxAttempts: 3,
		Base:        250 * time.Millisecond,
		Max:         30 * time.Second,
		Factor:      2,
		Strategy:    StrategyExponential,
		Jitter:      true,
		JitterKind:  JitterProportional,
	}
}

// Validate reports whether the policy is usable.
func (p PacingPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return errors.New("workitems: pacing max attempts must be at least 1")
	case p.Base < 0 || p.Max < 0:
		return errors.New("workitems: pacing delays must not be negative")
	case !(p.Factor >= 1):
		return errors.New("workitems: pacing factor must be at least 1.0")
	case p.Strategy != StrategyExponential && p.Strategy != StrategyLinear:
		return fmt.Errorf("workitems: unknown pacing strategy %q", p.Strategy)
	case p.JitterKind != JitterProportional && p.JitterKind != JitterAdditive:
		return fmt.Errorf("workitems: unknown pacing jitter %q", p.JitterKind)
	}
	return nil
}

// Backoff is compute_backoff: the delay after the attempt-th consecutive
// shed (attempt ≥ 1, else an error), with u a uniform value in [0, 1) for
// the jitter. The result never exceeds Max (plus Base for additive jitter),
// whatever attempt is.
func (p PacingPolicy) Backoff(attempt int, u float64) (time.Duration, error) {
	if attempt < 1 {
		return 0, fmt.Errorf("workitems: backoff attempt %d, want at least 1", attempt)
	}
	var capped time.Duration
	if p.Strategy == StrategyLinear {
		raw := float64(p.Base) * float64(attempt)
		capped = time.Duration(math.Min(raw, float64(p.Max)))
	} else {
		b := &backoff.ExponentialBackOff{
			InitialInterval:     p.Base,
			RandomizationFactor: 0, // the capped curve; our jitter goes on top
			Multiplier:          p.Factor,
			MaxInterval:         p.Max,
			MaxElapsedTime:      0, // never backoff.Stop
			Stop:                backoff.Stop,
			Clock:               backoff.SystemClock,
		}
		b.Reset()
		// backoff/v4 saturates at MaxInterval, so once the cap is reached
		// further steps change nothing: stop there.
		for i := 0; i < attempt; i++ {
			capped = b.NextBackOff()
			if capped >= p.Max {
				capped = p.Max
				break
			}
		}
		capped = min(capped, p.Max)
	}
	if !p.Jitter {
		return capped, nil
	}
	u = math.Min(math.Max(u, 0), math.Nextafter(1, 0))
	if p.JitterKind == JitterAdditive {
		return capped + time.Duration(u*float64(p.Base)), nil
	}
	d := time.Duration(float64(capped) * (0.5 + 0.5*u))
	if d >= capped && capped > 0 { // float rounding at u → 1
		d = capped - 1
	}
	return d, nil
}

// PacingState is one class's pacing state in a Snapshot.
type PacingState struct {
	ConsecutiveSheds int
	PacedRemaining   time.Duration
}

// Pacer keeps the claim-pacing state per class. The zero value is not
// usable; create one with NewPacer. A Pacer is safe for concurrent use.
type Pacer struct {
	policy PacingPolicy
	now    func() time.Time
	rand   func() float64
	log    *slog.Logger

	mu    sync.Mutex
	state map[priority.Class]*classPacing
}

type classPacing struct {
	sheds int
	until time.Time
}

// NewPacer returns a Pacer for policy (its zero value means
// DefaultPacingPolicy) on clock now (nil: time.Now, which carries the
// monotonic reading) with jitter source rnd (nil: math/rand/v2).
func NewPacer(policy PacingPolicy, now func() time.Time, rnd func() float64, log *slog.Logger) (*Pacer, error) {
	if policy == (PacingPolicy{}) {
		policy = DefaultPacingPolicy()
	}
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = defaultRand
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pacer{policy: policy, now: now, rand: rnd, log: log, state: make(map[priority.Class]*classPacing)}, nil
}

// Pending returns how long class c stays paced after now (zero when not paced).
func (p *Pacer) Pending(c priority.Class, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state[c]
	if st == nil {
		return 0
	}
	return max(0, st.until.Sub(now))
}

// RaiseIfPaced returns a *PacedError when class c is inside its pacing
// window, nil otherwise.
func (p *Pacer) RaiseIfPaced(c priority.Class) error {
	r := p.Pending(c, p.now())
	if r <= 0 {
		return nil
	}
	return &PacedError{text: fmt.Sprintf("BUSY: client-side claim pacing active for class '%s', retry after %.3fs (engine not contacted)", c, r.Seconds())}
}

// RecordShed counts a shed of class c and opens its window; it returns the
// window's length.
func (p *Pacer) RecordShed(c priority.Class) time.Duration {
	u := p.rand()
	p.mu.Lock()
	st := p.state[c]
	if st == nil {
		st = &classPacing{}
		p.state[c] = st
	}
	if st.sheds < math.MaxInt {
		st.sheds++
	}
	n := st.sheds
	delay, err := p.policy.Backoff(n, u)
	if err != nil { // unreachable: n ≥ 1
		delay = p.policy.Max
	}
	st.until = p.now().Add(delay)
	p.mu.Unlock()
	p.log.Info("workitems: claim shed, pacing class", "policy", p.policy.Name, "class", c.String(), "consecutive_sheds", n, "delay", delay)
	return delay
}

// RecordAdmitted clears class c's state after a normal answer.
func (p *Pacer) RecordAdmitted(c priority.Class) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.state[c]; st != nil {
		st.sheds, st.until = 0, time.Time{}
	}
}

// Snapshot returns the state of every class that has one.
func (p *Pacer) Snapshot() map[priority.Class]PacingState {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[priority.Class]PacingState, len(p.state))
	for c, st := range p.state {
		out[c] = PacingState{ConsecutiveSheds: st.sheds, PacedRemaining: max(0, st.until.Sub(now))}
	}
	return out
}

// Reset clears all state.
func (p *Pacer) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.state)
}

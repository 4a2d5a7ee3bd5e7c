package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictrt/edict/leases"
)

// Defaults of [ThrottleConfig].
const (
	DefaultMaxWait        = 120 * time.Second
	DefaultPoll           = 500 * time.Millisecond
	DefaultSlots          = 2
	DefaultAcquireTimeout = 30 * time.Second
)

// ThrottleConfig configures a [Throttle]. The zero value is a process-local
// throttle with the defaults.
type ThrottleConfig struct {
	// LeaseDir is the shared foreground lease directory
	// (<data dir>/runtime/foreground-leases). Empty means no sharing: only
	// this process's foreground counts.
	LeaseDir string
	// Lease configures the lease this process holds and the scanner that
	// sees other processes' leases.
	Lease leases.Config
	// MaxWait bounds how long [Throttle.Checkpoint] holds background work
	// back. Zero means 120 s; a negative value means no wait.
	MaxWait time.Duration
	// Poll is how often a waiting Checkpoint or Slot re-checks foreground.
	// Zero means 500 ms.
	Poll time.Duration
	// Slots bounds concurrent background work taken through [Throttle.Slot].
	// Zero or negative means 2.
	Slots int
	// AcquireTimeout bounds the wait for a free slot. Zero means 30 s.
	AcquireTimeout time.Duration
	// Logger receives lease failures. Nil discards them.
	Logger *slog.Logger
}

// Throttle is the cooperative checkpoint of background loops (the
// reference's BackgroundThrottle): foreground work in this process enters
// [Throttle.Foreground], foreground work in other processes on the host is
// seen through their lease files, and background loops call
// [Throttle.Checkpoint] between units of work or take a [Throttle.Slot].
// A Throttle is safe for concurrent use.
type Throttle struct {
	cfg     ThrottleConfig
	log     *slog.Logger
	scanner *leases.Scanner // nil without LeaseDir
	slots   chan struct{}

	local atomic.Bool

	mu      sync.Mutex
	depth   int
	lease   *leases.Lease
	cleared chan struct{} // closed when local foreground ends
}

// NewThrottle returns a throttle for cfg.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	cfg.MaxWait = max(cfg.MaxWait, 0)
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = DefaultAcquireTimeout
	}
	t := &Throttle{cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.Slots), cleared: make(chan struct{})}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseDir != "" {
		t.scanner = leases.NewScanner(cfg.LeaseDir, cfg.Lease)
	}
	return t
}

// Foreground marks this process as doing foreground work until done is
// called. It is re-entrant: the first entry sets the local flag and, with a
// lease directory, holds a lease (written before Foreground returns; ctx
// bounds that write, and a failure leaves sharing off while the local flag
// still works); the last done clears both. Each done is idempotent.
func (t *Throttle) Foreground(ctx context.Context) (done func()) {
	t.mu.Lock()
	t.depth++
	if t.depth == 1 {
		t.local.Store(true)
		if t.cfg.LeaseDir != "" {
			l, err := leases.Hold(ctx, t.cfg.LeaseDir, t.cfg.Lease)
			if err != nil {
				t.log.Warn("scheduler: foreground lease not shared", "dir", t.cfg.LeaseDir, "err", err)
			}
			t.lease = l
		}
	}
	t.mu.Unlock()
	var once sync.Once
	return func() { once.Do(t.release) }
}

func (t *Throttle) release() {
	t.mu.Lock()
	t.depth = max(0, t.depth-1)
	if t.depth > 0 {
		t.mu.Unlock()
		return
	}
	t.local.Store(false)
	l := t.lease
	t.lease = nil
	if l != nil {
		if err := l.Close(); err != nil {
			t.log.Warn("scheduler: foreground lease not removed", "path", l.Path(), "err", err)
		}
	}
	if t.scanner != nil {
		t.scanner.Reset()
	}
	close(t.cleared)
	t.cleared = make(chan struct{})
	t.mu.Unlock()
}

// Active reports whether foreground work is active: in this process, or in
// another process holding a live lease in the lease directory (scanned at
// most once per cache interval).
func (t *Throttle) Active() bool {
	if t.local.Load() {
		return true
	}
	return t.scanner != nil && t.scanner.Active()
}

// wake returns a channel closed when local foreground next ends.
func (t *Throttle) wake() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cleared
}

// pause waits one poll interval, or less when local foreground ends.
func (t *Throttle) pause(ctx context.Context) error {
	wake := t.wake()
	if !t.Active() {
		return nil
	}
	timer := time.NewTimer(t.cfg.Poll)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	case <-wake:
	}
	return nil
}

// Checkpoint holds background work back while foreground is active. It
// returns nil once foreground is clear, or after MaxWait (counted in poll
// steps) so background is never starved to zero, and ctx.Err() when ctx is
// done first.
func (t *Throttle) Checkpoint(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for waited := time.Duration(0); t.Active(); waited += t.cfg.Poll {
		if waited >= t.cfg.MaxWait {
			return nil
		}
		if err := t.pause(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Slot takes one of the bounded background slots. It waits until
// foreground is clear, takes a slot (an error wrapping [ErrSlotTimeout]
// after AcquireTimeout), and re-checks foreground: if it became active
// meanwhile the slot is given back and Slot waits again. Every wait is
// bounded by ctx; a done ctx returns ctx.Err(). release gives the slot back
// and is idempotent.
func (t *Throttle) Slot(ctx context.Context) (release func(), err error) {
	for {
		for t.Active() {
			if err := t.pause(ctx); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		timer := time.NewTimer(t.cfg.AcquireTimeout)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
			return nil, ErrSlotTimeout
		case t.slots <- struct{}{}:
			timer.Stop()
		}
		if t.Active() {
			<-t.slots
			continue
		}
		var once sync.Once
		return func() { once.Do(func() { <-t.slots }) }, nil
	}
}

package llmgate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictrt/edict/priority"
)

// Gate is a priority-aware admission gate for one model endpoint: a counting
// semaphore of Capacity slots of which background calls may take at most
// Capacity-Reserve, and none while a high call waits. Its methods are safe
// for concurrent use. A Gate must be built with [New] (or taken from a
// [Registry]).
type Gate struct {
	mu       sync.Mutex
	capacity int
	reserve  int
	active   int
	high, bg queue // parked callers, FIFO each

	window   time.Duration // Config.QuietWindow, fixed
	lastHigh time.Time     // last high admission, when window > 0
	hadHigh  bool          // a high call has been admitted since built
	quiet    *time.Timer   // re-evaluates background when the window ends
	quietAt  time.Time     // when quiet is due; zero when not armed

	waiting   PerClass
	cancelled PerClass
	admitted  PerClass        // admitted at once, counted under mu
	woken     [4]atomic.Int64 // admitted after a wait, counted by the waiter

	policy reservePolicy
	model  string
	obs    observer
	pool   sync.Pool // *waiter

	// onGrant, when set (tests), is called under mu before every grant.
	onGrant func(grantEvent)
	// beforeWait, when set (tests), is called by a queued caller between
	// leaving mu and waiting, where a grant and ctx's end can race.
	beforeWait func(ctx context.Context)
}

// grantEvent is what a test hook sees at the moment of a grant.
type grantEvent struct {
	class       priority.Class
	active      int // in flight before the grant
	capacity    int
	reserve     int
	ceiling     int // background ceiling at that instant
	highWaiting int // high callers still parked
}

// waiter is one parked Acquire.
type waiter struct {
	ready      chan struct{} // one value on grant
	class      priority.Class
	granted    bool
	prev, next *waiter
	// The lastHigh this grant replaced, to undo it if the caller gives the
	// slot back.
	stamped     bool
	stampAt     time.Time
	prevHigh    time.Time
	prevHadHigh bool
}

// queue is an intrusive FIFO of waiters.
type queue struct {
	head, tail *waiter
	n          int
}

func (q *queue) push(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.n++
}

func (q *queue) remove(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
}

// New returns a gate configured by cfg. The reserve environment variables
// are read now, once; later changes are not seen by this gate. New fails
// only when the meter provider refuses the gate's instruments.
func New(cfg Config) (*Gate, error) {
	return build(cfg, osGetenv)
}

func build(cfg Config, getenv func(string) string) (*Gate, error) {
	g := &Gate{
		capacity: max(1, cfg.Capacity),
		window:   max(0, cfg.QuietWindow),
		policy:   newReservePolicy(cfg.Reserve, getenv),
		model:    cfg.Model,
	}
	if g.model == "" {
		g.model = DefaultModel
	}
	g.reserve = g.policy.reserve(g.capacity)
	g.pool.New = func() any { return &waiter{ready: make(chan struct{}, 1)} }
	if err := g.obs.init(g, cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// Capacity returns the most calls the gate lets in flight at once.
func (g *Gate) Capacity() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.capacity
}

// Reserve returns the number of slots background calls never take.
func (g *Gate) Reserve() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reserve
}

// Stats returns a snapshot of the gate's counters.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	s := Stats{
		Capacity:  g.capacity,
		Reserve:   g.reserve,
		InFlight:  g.active,
		Waiting:   g.waiting,
		Cancelled: g.cancelled,
	}
	// admitted is written under mu (take); woken is atomic.
	for i := range g.woken {
		s.Admitted[i] = g.admitted[i] + g.woken[i].Load()
	}
	g.mu.Unlock()
	return s
}

// Acquire takes one slot for the class of ctx ([priority.From]: an untagged
// context is Orchestration, a high class). It blocks until the slot is
// granted or ctx is done. On ctx done it returns ctx.Err() and holds
// nothing, the gate left as if the call had never been made; a slot granted
// in the same instant is handed on. Each successful Acquire must be paired
// with one [Gate.Release].
func (g *Gate) Acquire(ctx context.Context) error {
	return g.acquire(ctx, priority.From(ctx))
}

// TryAcquire takes one slot for the class of ctx if the gate admits it now,
// and reports whether it did. It never blocks and never queues.
func (g *Gate) TryAcquire(ctx context.Context) bool {
	c := priority.From(ctx)
	now := g.clock()
	g.mu.Lock()
	ok := g.admitsNewcomer(c, now)
	if ok {
		g.take(c, now)
	}
	g.mu.Unlock()
	if ok {
		g.obs.admitted(ctx, c, 0)
	}
	return ok
}

// Release frees one slot and hands it to the caller that should have it.
// Release panics when no slot is held.
func (g *Gate) Release() {
	g.mu.Lock()
	if g.active == 0 {
		g.mu.Unlock()
		panic(errOverRelease)
	}
	g.active--
	if g.high.n+g.bg.n > 0 {
		g.dispatch(g.clock())
	}
	g.mu.Unlock()
}

func (g *Gate) acquire(ctx context.Context, c priority.Class) error {
	now := g.clock()
	g.mu.Lock()
	if g.admitsNewcomer(c, now) {
		g.take(c, now)
		g.mu.Unlock()
		g.obs.admitted(ctx, c, 0)
		return nil
	}
	if err := ctx.Err(); err != nil {
		g.cancelled[c.Order()]++
		g.mu.Unlock()
		return err
	}
	w := g.pool.Get().(*waiter)
	w.class = c
	if c.High() {
		g.high.push(w)
	} else {
		g.bg.push(w)
	}
	g.waiting[c.Order()]++
	g.armQuiet(now)
	g.mu.Unlock()
	if g.beforeWait != nil {
		g.beforeWait(ctx)
	}

	start := time.Now()
	select {
	case <-w.ready:
		g.woken[c.Order()].Add(1)
		g.putWaiter(w)
		g.obs.waited(ctx, g.model, c, start, time.Now(), nil)
		return nil
	case <-ctx.Done():
	}

	g.mu.Lock()
	if w.granted {
		// Granted as ctx ended: give the slot back, undo the stamp.
		<-w.ready
		g.active--
		if w.stamped && g.lastHigh.Equal(w.stampAt) {
			g.lastHigh, g.hadHigh = w.prevHigh, w.prevHadHigh
		}
	} else {
		g.queueOf(c).remove(w)
		g.waiting[c.Order()]--
	}
	g.cancelled[c.Order()]++
	// The slot given back, or one fewer high waiter, may admit others.
	if g.high.n+g.bg.n > 0 {
		g.dispatch(g.clock())
	} else {
		g.armQuiet(time.Time{})
	}
	g.mu.Unlock()
	g.putWaiter(w)
	err := ctx.Err()
	g.obs.waited(ctx, g.model, c, start, time.Now(), err)
	return err
}

func (g *Gate) putWaiter(w *waiter) {
	*w = waiter{ready: w.ready}
	g.pool.Put(w)
}

func (g *Gate) queueOf(c priority.Class) *queue {
	if c.High() {
		return &g.high
	}
	return &g.bg
}

// clock returns the monotonic time when the quiet window needs it, else
// the zero time (so the fast path reads no clock).
func (g *Gate) clock() time.Time {
	if g.window > 0 {
		return time.Now()
	}
	return time.Time{}
}

// ceiling returns the most calls in flight, of any class, under which a
// background call is admitted. Called with mu held.
func (g *Gate) ceiling(now time.Time) int {
	c := g.capacity - g.reserve
	if g.window > 0 && g.hadHigh && now.Sub(g.lastHigh) < g.window {
		c = max(1, c/2)
	}
	return c
}

// admits is the admission predicate for a call of class c, ignoring queue
// order. Called with mu held.
func (g *Gate) admits(c priority.Class, now time.Time) bool {
	switch {
	case g.active >= g.capacity:
		return false
	case c.High():
		return true
	case g.high.n > 0:
		return false
	}
	return g.active < g.ceiling(now)
}

// admitsNewcomer is admits for a caller not yet queued: it never overtakes
// a parked caller of its own tier. (A high caller is parked only while the
// gate is full, so a parked high caller refuses every newcomer.) Written
// out for the uncontended path. Called with mu held.
func (g *Gate) admitsNewcomer(c priority.Class, now time.Time) bool {
	if g.active >= g.capacity || g.high.n > 0 {
		return false
	}
	if c.High() {
		return true
	}
	return g.bg.n == 0 && g.active < g.capacity-g.reserve && (g.window == 0 || g.active < g.ceiling(now))
}

// take counts one slot as taken for a newcomer of class c. Called with mu
// held.
func (g *Gate) take(c priority.Class, now time.Time) {
	if g.onGrant != nil || g.window > 0 {
		g.grant(c, now, nil)
	} else {
		g.active++
	}
	g.admitted[c.Order()]++
}

// grant counts one slot as taken for class c (for waiter w when not nil).
// Called with mu held.
func (g *Gate) grant(c priority.Class, now time.Time, w *waiter) {
	if g.onGrant != nil {
		g.onGrant(grantEvent{class: c, active: g.active, capacity: g.capacity,
			reserve: g.reserve, ceiling: g.ceiling(now), highWaiting: g.high.n})
	}
	g.active++
	// now was read before mu was taken: never move lastHigh back.
	if c.High() && g.window > 0 && (!g.hadHigh || now.After(g.lastHigh)) {
		if w != nil {
			w.stamped, w.stampAt = true, now
			w.prevHigh, w.prevHadHigh = g.lastHigh, g.hadHigh
		}
		g.lastHigh, g.hadHigh = now, true
	}
}

// dispatch grants slots to parked callers, high first, FIFO within a tier,
// then wakes them: a woken caller already owns its slot. Called with mu
// held after every event that can make a parked caller admissible.
func (g *Gate) dispatch(now time.Time) {
	for g.high.n > 0 && g.active < g.capacity {
		g.wake(g.high.head, now)
	}
	for g.high.n == 0 && g.bg.n > 0 && g.admits(priority.BackgroundIngestion, now) {
		g.wake(g.bg.head, now)
	}
	g.armQuiet(now)
}

func (g *Gate) wake(w *waiter, now time.Time) {
	g.queueOf(w.class).remove(w)
	g.waiting[w.class.Order()]--
	g.grant(w.class, now, w)
	w.granted = true
	w.ready <- struct{}{}
}

// armQuiet keeps a timer due when the quiet window ends while background
// callers are parked and held back by it, so that its end is an event that
// re-evaluates them. Called with mu held.
func (g *Gate) armQuiet(now time.Time) {
	if g.window <= 0 {
		return
	}
	if g.bg.n == 0 || g.high.n > 0 || !g.hadHigh || now.IsZero() || now.Sub(g.lastHigh) >= g.window {
		if !g.quietAt.IsZero() {
			g.quiet.Stop()
			g.quietAt = time.Time{}
		}
		return
	}
	due := g.lastHigh.Add(g.window)
	if due.Equal(g.quietAt) {
		return
	}
	g.quietAt = due
	if g.quiet == nil {
		g.quiet = time.AfterFunc(due.Sub(now), g.quietEnded)
		return
	}
	g.quiet.Reset(due.Sub(now))
}

func (g *Gate) quietEnded() {
	g.mu.Lock()
	g.quietAt = time.Time{}
	g.dispatch(time.Now())
	g.mu.Unlock()
}

// resize sets the capacity in place: calls in flight stay counted, the
// reserve is re-derived from the settings read when the gate was built.
func (g *Gate) resize(capacity int) {
	capacity = max(1, capacity)
	now := g.clock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if capacity == g.capacity {
		return
	}
	g.capacity = capacity
	g.reserve = g.policy.reserve(capacity)
	if g.high.n+g.bg.n > 0 {
		g.dispatch(now)
	}
}

package work

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ackConfirmWait bounds how long a barrier waits for one outstanding ack
// confirmation; an entry older than it is given up (the +ACK or its
// confirmation was lost; a lost +ACK is redelivered after AckWait, found
// acked in its record and acknowledged then).
const ackConfirmWait = 5 * time.Second

// ackSweepAt is the number of outstanding confirmations past which a new
// ack first drops the entries older than ackConfirmWait.
const ackSweepAt = 4096

// pendingAck is one +ACK sent without waiting for its confirmation.
type pendingAck struct {
	p    pair
	at   time.Time
	done chan struct{}
}

// ackTracker tracks the +ACKs the ack op sent without waiting for
// JetStream's confirmation. The ack op answers once the record says acked
// (the durable outcome); JetStream removes the message from the
// work-queue stream asynchronously. Everything that reads JetStream's view
// of the stored messages (stats, the count refresh, a queue's first
// sequence) first waits on barrier for the confirmations outstanding at
// that moment, so it never counts an acknowledged item as stored.
type ackTracker struct {
	nc     *nats.Conn
	prefix string // reply subject prefix; the suffix is the ack's number

	mu   sync.Mutex
	sub  *nats.Subscription
	next uint64
	out  map[uint64]*pendingAck
}

// start subscribes to the confirmations.
func (a *ackTracker) start(nc *nats.Conn) error {
	a.nc = nc
	a.prefix = nc.NewInbox() + "."
	a.out = make(map[uint64]*pendingAck)
	sub, err := nc.Subscribe(a.prefix+"*", a.confirmed)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.sub = sub
	a.mu.Unlock()
	return nil
}

// stop drops the subscription and releases every waiter.
func (a *ackTracker) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub != nil {
		_ = a.sub.Unsubscribe()
		a.sub = nil
	}
	for n, pa := range a.out {
		close(pa.done)
		delete(a.out, n)
	}
}

// confirmed is the subscription's handler: JetStream processed ack n.
func (a *ackTracker) confirmed(m *nats.Msg) {
	n, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, a.prefix), 10, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	if pa := a.out[n]; pa != nil {
		close(pa.done)
		delete(a.out, n)
	}
	a.mu.Unlock()
}

// send publishes +ACK to reply without waiting for the confirmation.
func (a *ackTracker) send(reply string, p pair) error {
	now := time.Now()
	a.mu.Lock()
	if a.sub == nil {
		a.mu.Unlock()
		return nats.ErrConnectionClosed
	}
	if len(a.out) >= ackSweepAt {
		a.sweepLocked(now)
	}
	a.next++
	n := a.next
	a.out[n] = &pendingAck{p: p, at: now, done: make(chan struct{})}
	a.mu.Unlock()
	if err := a.nc.PublishRequest(reply, a.prefix+strconv.FormatUint(n, 10), []byte("+ACK")); err != nil {
		a.mu.Lock()
		if pa := a.out[n]; pa != nil {
			close(pa.done)
			delete(a.out, n)
		}
		a.mu.Unlock()
		return err
	}
	return nil
}

// sweepLocked gives up the entries older than ackConfirmWait.
func (a *ackTracker) sweepLocked(now time.Time) {
	for n, pa := range a.out {
		if now.Sub(pa.at) >= ackConfirmWait {
			close(pa.done)
			delete(a.out, n)
		}
	}
}

// barrier waits until every ack outstanding now (of queue only, when only
// is non-nil) is confirmed or older than ackConfirmWait, or ctx ends.
func (a *ackTracker) barrier(ctx context.Context, only *pair) {
	a.mu.Lock()
	if len(a.out) == 0 {
		a.mu.Unlock()
		return
	}
	var wait []*pendingAck
	for _, pa := range a.out {
		if only == nil || pa.p == *only {
			wait = append(wait, pa)
		}
	}
	a.mu.Unlock()
	if len(wait) == 0 {
		return
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for _, pa := range wait {
		left := ackConfirmWait - time.Since(pa.at)
		if left <= 0 {
			continue
		}
		select {
		case <-pa.done:
			continue
		default:
		}
		if t == nil {
			t = time.NewTimer(left)
		} else {
			t.Reset(left)
		}
		select {
		case <-pa.done:
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
	a.mu.Lock()
	a.sweepLocked(time.Now())
	a.mu.Unlock()
}

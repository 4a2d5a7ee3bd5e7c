package work

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Requests to JetStream that the engine does not wait for at once go out
// with a reply subject on one long-lived answer inbox and are awaited
// later. An ack with next uses it: it sends its +ACK and claims the next
// item while JetStream confirms, and its reply waits for the confirmation,
// so a stats call that follows the reply no longer counts the acked item.

// asyncWait bounds how long an operation waits for an answer.
const asyncWait = 5 * time.Second

// maxAsync bounds the answer table; past it, entries older than
// 2·asyncWait (whose answer never came) are dropped.
const maxAsync = 1 << 16

// asyncReq is one request whose answer arrives on the answer inbox.
type asyncReq struct {
	at   time.Time
	done chan struct{} // closed once ans is set
	ans  *nats.Msg
}

// answers is the answer inbox and the table of requests waiting on it.
type answers struct {
	mu      sync.Mutex
	sub     *nats.Subscription
	inbox   string
	next    uint64
	waiting map[uint64]*asyncReq
}

// startAnswers subscribes the answer inbox. The subscription's delivery
// goroutine is owned by the connection; stopAnswers unsubscribes it.
func (s *Service) startAnswers() error {
	a := &s.ans
	a.waiting = make(map[uint64]*asyncReq)
	a.inbox = s.nc.NewInbox()
	sub, err := s.nc.Subscribe(a.inbox+".*", s.answered)
	if err != nil {
		return fmt.Errorf("work: answer inbox: %w", err)
	}
	a.sub = sub
	return nil
}

// stopAnswers drops the answer subscription; operations still waiting give
// up after asyncWait or when their context or the service ends.
func (s *Service) stopAnswers() {
	s.ans.mu.Lock()
	sub := s.ans.sub
	s.ans.sub = nil
	s.ans.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// answered hands an answer to its request.
func (s *Service) answered(m *nats.Msg) {
	i := len(m.Subject) - 1
	for i >= 0 && m.Subject[i] != '.' {
		i--
	}
	tok, err := strconv.ParseUint(m.Subject[i+1:], 10, 64)
	if err != nil {
		return
	}
	s.ans.mu.Lock()
	r := s.ans.waiting[tok]
	delete(s.ans.waiting, tok)
	s.ans.mu.Unlock()
	if r != nil {
		r.ans = m
		close(r.done)
	}
}

// send publishes msg with a reply on the answer inbox and returns the
// request to await.
func (s *Service) send(msg *nats.Msg) (*asyncReq, error) {
	r := &asyncReq{at: time.Now(), done: make(chan struct{})}
	a := &s.ans
	a.mu.Lock()
	if a.sub == nil {
		a.mu.Unlock()
		return nil, ErrClosed
	}
	if len(a.waiting) >= maxAsync {
		for tok, old := range a.waiting {
			if time.Since(old.at) > 2*asyncWait {
				delete(a.waiting, tok)
			}
		}
	}
	a.next++
	tok := a.next
	a.waiting[tok] = r
	msg.Reply = a.inbox + "." + strconv.FormatUint(tok, 10)
	a.mu.Unlock()
	if err := s.nc.PublishMsg(msg); err != nil {
		a.mu.Lock()
		delete(a.waiting, tok)
		a.mu.Unlock()
		return nil, err
	}
	return r, nil
}

// errNoAnswer is a request whose answer did not come in time.
var errNoAnswer = errors.New("work: no answer from JetStream")

// wait returns r's answer, or an error once ctx or the service ends or
// asyncWait passed.
func (s *Service) wait(ctx context.Context, r *asyncReq) (*nats.Msg, error) {
	select {
	case <-r.done:
		return r.ans, nil
	default:
	}
	t := time.NewTimer(asyncWait - time.Since(r.at))
	defer t.Stop()
	select {
	case <-r.done:
		return r.ans, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.base.Done():
		return nil, ErrClosed
	case <-t.C:
		return nil, errNoAnswer
	}
}

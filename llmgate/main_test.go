package llmgate

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/edictrt/edict/priority"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// newGate builds a gate that ignores the process environment.
func newGate(t testing.TB, cfg Config) *Gate {
	t.Helper()
	g, err := build(cfg, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func with(c priority.Class) context.Context { return priority.With(context.Background(), c) }

// call is one Acquire running in its own goroutine.
type call struct {
	class  priority.Class
	done   chan error
	cancel context.CancelFunc
	err    error
	over   bool
}

// start runs Acquire for class c; inside a synctest bubble, follow it with
// synctest.Wait before looking at the outcome.
func start(g *Gate, c priority.Class) *call {
	ctx, cancel := context.WithCancel(with(c))
	cl := &call{class: c, done: make(chan error, 1), cancel: cancel}
	go func() { cl.done <- g.Acquire(ctx) }()
	return cl
}

// holdKey carries, in a call's context, a channel its Acquire waits on after
// queueing (through Gate.beforeWait) before it waits for its grant.
type holdKey struct{}

func holdBeforeWait(ctx context.Context) {
	if ch, ok := ctx.Value(holdKey{}).(chan struct{}); ok {
		<-ch
	}
}

// startHeld is start with the call stopped between queueing and waiting
// until hold is closed; g.beforeWait must be holdBeforeWait.
func startHeld(g *Gate, c priority.Class, hold chan struct{}) *call {
	ctx, cancel := context.WithCancel(context.WithValue(with(c), holdKey{}, hold))
	cl := &call{class: c, done: make(chan error, 1), cancel: cancel}
	go func() { cl.done <- g.Acquire(ctx) }()
	return cl
}

// finished reports, without blocking, whether Acquire has returned, and
// with what.
func (c *call) finished() (bool, error) {
	if !c.over {
		select {
		case c.err = <-c.done:
			c.over = true
		default:
		}
	}
	return c.over, c.err
}

// admitted reports whether Acquire returned nil.
func (c *call) admitted() bool {
	over, err := c.finished()
	return over && err == nil
}

func stringsTrim(s string) string { return strings.TrimSpace(s) }

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

// work_freePort returns a loopback port that was free a moment ago, so a
// restarted daemon can listen where the workers reconnect.
func work_freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// work_ledger records what the workers saw.
type work_ledger struct {
	mu      sync.Mutex
	acked   map[string]int  // successful acks per item
	unknown map[string]bool // an ack whose reply was lost, then fenced
	fenced  int
}

func (l *work_ledger) settled(ids []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if l.acked[id] == 0 && !l.unknown[id] {
			return false
		}
	}
	return true
}

// TestWorkCrashRestart kills edict serve with SIGKILL while workers hold
// claims, restarts it on the same data directory and port, and checks that
// every submitted item is eventually acknowledged exactly once: none lost,
// none acknowledged twice, and no fenced worker's ack accepted.
func TestWorkCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process crash test")
	}
	dir := t.TempDir()
	listen := fmt.Sprintf("127.0.0.1:%d", work_freePort(t))
	p := startServe(t, dir, "--listen", listen)

	nc, err := nats.Connect(p.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Name("work crash test"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := workitems.New(nc, workitems.Config{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const items = 40
	var ids []string
	for i := range items {
		id := fmt.Sprintf("crash-%02d", i)
		ids = append(ids, id)
		class := priority.BackgroundIngestion
		typ := "document"
		if i%5 == 0 {
			class, typ = priority.Interactive, "conversation"
		}
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Submit(sctx, workitems.Item{ID: id, Type: typ, Class: class})
		scancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	led := &work_ledger{acked: map[string]int{}, unknown: map[string]bool{}}
	ackedCount := make(chan struct{}, items*2)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			worker := fmt.Sprintf("crash-worker-%d", w)
			for ctx.Err() == nil {
				cl, err := c.Claim(ctx, workitems.ClaimRequest{Worker: worker, Lease: 2 * time.Second, Wait: 300 * time.Millisecond})
				if err != nil || cl == nil {
					if err != nil {
						time.Sleep(50 * time.Millisecond) // engine down or shed: retry at a fixed short interval
					}
					continue
				}
				// Work on the item for a while, so claims are held when the daemon dies.
				time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
				lost := false
				for ctx.Err() == nil {
					err := cl.Ack(ctx)
					led.mu.Lock()
					switch {
					case err == nil:
						led.acked[cl.ID]++
						ackedCount <- struct{}{}
					case errors.Is(err, workitems.ErrFenced):
						if lost {
							led.unknown[cl.ID] = true
						} else {
							led.fenced++
						}
					}
					led.mu.Unlock()
					if err == nil || errors.Is(err, workitems.ErrFenced) {
						break
					}
					// The ack's outcome is unknown (the daemon died): try again with the same token.
					lost = true
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	// Kill the daemon once a few items are done and others are held.
	for range 8 {
		select {
		case <-ackedCount:
		case <-time.After(60 * time.Second):
			t.Fatalf("fewer than 8 acks within 60 s\n%s", p.logs())
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done // the exit of the killed process; its ProcessState is now set
	p = startServe(t, dir, "--listen", listen)

	// Poll the workers' ledger at a fixed interval up to a deadline: the
	// longest path is a lease that expired while the daemon was down and
	// whose redelivery waits out JetStream's AckWait (60 s), plus a margin.
	deadline := time.Now().Add(90 * time.Second)
	for !led.settled(ids) {
		if time.Now().After(deadline) {
			led.mu.Lock()
			t.Fatalf("not every item was acked within 90 s after the restart: %v unknown %v\n%s", led.acked, led.unknown, p.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	led.mu.Lock()
	defer led.mu.Unlock()
	for _, id := range ids {
		if n := led.acked[id]; n > 1 {
			t.Errorf("%s acked %d times", id, n)
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	st, err := c.Stats(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for cls, s := range st.Classes {
		if s.Queued != 0 || s.InFlight != 0 || s.Dead != 0 {
			t.Errorf("class %s after the run: %+v", cls, s)
		}
	}
	t.Logf("acked %d, fenced stale acks %d, unknown-outcome acks %d", len(led.acked), led.fenced, len(led.unknown))
}

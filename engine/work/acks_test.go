package work

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/priority"
)

// TestStatsRightAfterAck checks that stats read right after an ack, and a
// claim that follows it, never see the acked item stored: the ack's +ACK is
// not confirmed before the ack answers, so stats must wait for it.
func TestStatsRightAfterAck(t *testing.T) {
	e := newEnv(t, Config{})
	const n = 40
	for i := range n {
		// Two types of one class, so the claim also reads queue heads.
		typ := []string{"document", "codebase"}[i%2]
		e.submit(fmt.Sprintf("s%d", i), typ, "background_ingestion", nil)
	}
	for left := n - 1; left >= 0; left-- {
		c := e.claim(nil)
		if !c.Claimed {
			t.Fatalf("claim with %d left: %+v", left+1, c)
		}
		e.must("ack", map[string]any{"token": c.Token}, nil)
		var st statsReply
		e.must("stats", map[string]any{}, &st)
		bg := st.Classes[priority.BackgroundIngestion.String()]
		if bg.Queued != left || bg.InFlight != 0 {
			t.Fatalf("stats after ack with %d left: %+v", left, bg)
		}
	}
	if c := e.claim(nil); c.Claimed || c.Reason != "empty" {
		t.Fatalf("claim on an empty queue = %+v", c)
	}
}

// TestAckBarrier checks the barrier's waits: a confirmed ack releases it at
// once, one whose confirmation never comes after ackConfirmWait, a
// cancelled context at once, and a per-queue barrier ignores other queues.
func TestAckBarrier(t *testing.T) {
	pa, pb := pair{priority.Interactive, "a"}, pair{priority.Interactive, "b"}
	tests := []struct {
		name    string
		confirm bool // confirm ack 1 after 1 s
		only    *pair
		cancel  bool
		want    time.Duration
		left    int // outstanding entries after the barrier
	}{
		{name: "confirmed", confirm: true, want: time.Second, left: 0},
		{name: "lost confirmation", want: ackConfirmWait, left: 0},
		{name: "other queue only", only: &pb, want: 0, left: 1},
		{name: "same queue only", only: &pa, confirm: true, want: time.Second, left: 1},
		{name: "cancelled", cancel: true, want: 0, left: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &ackTracker{prefix: "_INBOX.x.", out: map[uint64]*pendingAck{}}
				now := time.Now()
				a.out[1] = &pendingAck{p: pa, at: now, done: make(chan struct{})}
				if tt.name == "same queue only" {
					a.out[2] = &pendingAck{p: pb, at: now, done: make(chan struct{})}
				}
				if tt.confirm {
					go func() {
						time.Sleep(time.Second)
						a.confirmed(&nats.Msg{Subject: "_INBOX.x.1"})
					}()
				}
				ctx, cancel := context.WithCancel(t.Context())
				if tt.cancel {
					cancel()
				} else {
					defer cancel()
				}
				a.barrier(ctx, tt.only)
				if got := time.Since(now); got != tt.want {
					t.Errorf("barrier took %v, want %v", got, tt.want)
				}
				synctest.Wait()
				a.mu.Lock()
				left := len(a.out)
				a.mu.Unlock()
				if left != tt.left {
					t.Errorf("outstanding after barrier = %d, want %d", left, tt.left)
				}
				a.stop()
			})
		})
	}
}

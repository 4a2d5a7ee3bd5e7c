package work

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/internal/natstest"
)

// On a replicated stream (three JetStream nodes, Replicas 3) a stats call
// right after an ack's reply no longer counts the acked item, for a plain
// ack and an ack with next alike.
func TestReplicatedStatsAfterAck(t *testing.T) {
	srvs := natstest.RunCluster(t, 3)
	nc := natstest.Connect(t, srvs[0])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Replicas: 3}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // setup deadline: the streams' first leaders
	defer cancel()
	svc, err := Open(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	e := &env{t: t, js: js, cfg: cfg, svc: svc}
	e.warm()

	for _, mode := range []string{"plain", "next-empty", "next-same-queue"} {
		for i := range 15 {
			id := fmt.Sprintf("%s-%d", mode, i)
			e.submit(id, "conversation", "", nil)
			if mode == "next-same-queue" {
				e.submit(id+"-b", "conversation", "", nil)
			}
			c := e.claim(map[string]any{"wait_ms": 5000})
			if !c.Claimed {
				t.Fatalf("%s: claim = %+v", id, c)
			}
			var next string
			if mode == "plain" {
				e.must("ack", map[string]any{"token": c.Token}, nil)
			} else {
				var r ackReply
				e.must("ack", map[string]any{"token": c.Token, "next": map[string]any{"worker": "w", "types": []string{"conversation"}}}, &r)
				if r.Next == nil || r.Next.Claimed != (mode == "next-same-queue") {
					t.Fatalf("%s: ack with next = %+v", id, r)
				}
				next = r.Next.Token
			}
			var st statsReply
			e.must("stats", map[string]any{}, &st)
			if q := st.Classes["interactive"].Queued; q != 0 {
				t.Fatalf("%s: stats right after the ack reply count %d queued, want 0", id, q)
			}
			if next != "" {
				e.must("ack", map[string]any{"token": next}, nil)
			}
		}
	}
}

package workitems_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/internal/worktest"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

func TestAckNextLoop(t *testing.T) {
	e := startEngine(t, work.Config{}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{})
	ctx := reqCtx(t)
	for _, it := range []workitems.Item{
		{ID: "bg1", Type: "codebase"}, {ID: "bg2", Type: "codebase"},
		{ID: "q1", Type: "conversation"}, {ID: "q2", Type: "conversation"},
	} {
		if _, err := c.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := c.Claim(ctx, workitems.ClaimRequest{})
	var got []string
	for err == nil && cl != nil {
		got = append(got, cl.ID)
		if _, werr := cl.AckNext(ctx, workitems.ClaimRequest{Wait: time.Second}); !errors.Is(werr, workitems.ErrAckNextWait) {
			t.Fatalf("AckNext with a Wait = %v, want ErrAckNextWait", werr)
		}
		cl, err = cl.AckNext(ctx, workitems.ClaimRequest{})
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"q1", "q2", "bg1", "bg2"}
	if len(got) != len(want) {
		t.Fatalf("AckNext loop took %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AckNext loop took %v, want %v (highest class first)", got, want)
		}
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for cls, s := range st.Classes {
		if s.Queued != 0 || s.InFlight != 0 || s.Dead != 0 {
			t.Fatalf("stats[%s] = %+v after the loop, want all settled", cls, s)
		}
	}
}

// TestAckNextPacing: a paced class acks alone and reports the pacing as a
// *NextError; an ack with next that the engine sheds acks nothing and opens
// the class's window.
func TestAckNextPacing(t *testing.T) {
	s := natstest.Run(t, nil)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := work.Open(reqCtx(t), js, work.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	var shedOp atomic.Value
	shedOp.Store("")
	worktest.Serve(t, nc, w, worktest.Config{Shed: func(op string, _ priority.Class) bool { return op == shedOp.Load().(string) }})
	ctx := priority.With(reqCtx(t), priority.BackgroundIngestion)

	c := newClient(t, nc, workitems.Config{})
	for _, id := range []string{"p1", "p2", "p3"} {
		if _, err := c.Submit(ctx, workitems.Item{ID: id, Type: "codebase"}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := c.Claim(ctx, workitems.ClaimRequest{})
	if err != nil || cl == nil {
		t.Fatalf("claim = %v, %v", cl, err)
	}
	shedOp.Store("claim")
	if _, err := c.Claim(ctx, workitems.ClaimRequest{}); !workitems.IsBusyShed(err) {
		t.Fatalf("shed claim = %v", err)
	}
	shedOp.Store("")
	next, err := cl.AckNext(ctx, workitems.ClaimRequest{})
	var ne *workitems.NextError
	var pe *workitems.PacedError
	if next != nil || !errors.As(err, &ne) || !errors.As(err, &pe) {
		t.Fatalf("AckNext while paced = %v, %v; want a *NextError wrapping the *PacedError", next, err)
	}
	if err := cl.Ack(ctx); !errors.Is(err, workitems.ErrFenced) {
		t.Fatalf("Ack after AckNext acked alone = %v, want ErrFenced (already acked)", err)
	}

	c2 := newClient(t, nc, workitems.Config{})
	cl2, err := c2.Claim(ctx, workitems.ClaimRequest{})
	if err != nil || cl2 == nil {
		t.Fatalf("claim = %v, %v", cl2, err)
	}
	shedOp.Store("ack")
	next, err = cl2.AckNext(ctx, workitems.ClaimRequest{})
	if next != nil || errors.As(err, &ne) || !workitems.IsBusyShed(err) {
		t.Fatalf("shed AckNext = %v, %v; want the engine's BUSY, not a *NextError", next, err)
	}
	if _, err := c2.Claim(ctx, workitems.ClaimRequest{}); !errors.As(err, &pe) {
		t.Fatalf("claim after a shed AckNext = %v, want the pacing error", err)
	}
	shedOp.Store("")
	// The shed request acked nothing: the token still settles the item.
	if err := cl2.Ack(context.WithoutCancel(ctx)); err != nil {
		t.Fatalf("Ack after a shed AckNext = %v", err)
	}
}

package workitems_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

func TestClientLifecycle(t *testing.T) {
	e := startEngine(t, work.Config{RetryBase: time.Millisecond, RetryMax: 2 * time.Millisecond}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{})
	ctx := reqCtx(t)

	for i := range 10 {
		if _, err := c.Submit(ctx, workitems.Item{ID: fmt.Sprintf("bg%d", i), Type: "codebase", Payload: json.RawMessage(`{"i":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Submit(ctx, workitems.Item{ID: "q1", Type: "conversation", Payload: json.RawMessage(`{"q": "hi"}`), MaxAttempts: 2})
	if err != nil || r.ID != "q1" || r.Duplicate {
		t.Fatalf("Submit = %+v, %v", r, err)
	}
	if r, err := c.Submit(ctx, workitems.Item{ID: "q1", Type: "conversation"}); err != nil || !r.Duplicate {
		t.Fatalf("re-Submit = %+v, %v", r, err)
	}
	if _, err := c.Submit(ctx, workitems.Item{Type: "not a type"}); err == nil {
		t.Fatal("bad type accepted")
	}

	cl, err := c.Claim(ctx, workitems.ClaimRequest{})
	if err != nil || cl == nil || cl.ID != "q1" || cl.Class != priority.Interactive || cl.Attempt != 1 || cl.MaxAttempts != 2 {
		t.Fatalf("Claim = %+v, %v; want q1 first", cl, err)
	}
	if string(cl.Payload) != `{"q":"hi"}` && string(cl.Payload) != `{"q": "hi"}` {
		t.Fatalf("payload = %s", cl.Payload)
	}
	if d := time.Until(cl.LeaseExpiresAt); d < 50*time.Second || d > 61*time.Second {
		t.Fatalf("lease expires in %v", d)
	}
	// Defer consumes no attempt.
	if _, err := cl.Defer(ctx, 0, "admission_denied"); err != nil {
		t.Fatal(err)
	}
	cl, err = c.Claim(ctx, workitems.ClaimRequest{Classes: []priority.Class{priority.Interactive}, Wait: 5 * time.Second})
	if err != nil || cl == nil || cl.Attempt != 1 {
		t.Fatalf("after defer: %+v, %v", cl, err)
	}
	// Retry consumes one; the last retry dead-letters.
	if rr, err := cl.Retry(ctx, "boom"); err != nil || rr.Dead || rr.NextAt.IsZero() {
		t.Fatalf("Retry = %+v, %v", rr, err)
	}
	cl, err = c.Claim(ctx, workitems.ClaimRequest{Classes: []priority.Class{priority.Interactive}, Wait: 5 * time.Second})
	if err != nil || cl == nil || cl.Attempt != 2 {
		t.Fatalf("after retry: %+v, %v", cl, err)
	}
	if rr, err := cl.Retry(ctx, "boom"); err != nil || !rr.Dead {
		t.Fatalf("last Retry = %+v, %v", rr, err)
	}
	if err := cl.Ack(ctx); !errors.Is(err, workitems.ErrFenced) {
		t.Fatalf("Ack after dead letter = %v, want ErrFenced", err)
	}
	items, next, err := c.DeadList(ctx, priority.Interactive, "", 0)
	if err != nil || len(items) != 1 || items[0].ID != "q1" || items[0].Reason != "attempts_exhausted" || next != "" {
		t.Fatalf("DeadList = %+v %q %v", items, next, err)
	}
	if n, err := c.DeadReplay(ctx, []string{"q1"}); err != nil || n != 1 {
		t.Fatalf("DeadReplay = %d, %v", n, err)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Classes["interactive"].Queued != 1 || st.Classes["background_ingestion"].Queued != 10 || st.Lanes["ingestion"].Queued != 10 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	pend, err := c.Pending(ctx)
	if err != nil || pend["queries"] != 1 || pend["ingestion"] != 10 {
		t.Fatalf("Pending = %v, %v", pend, err)
	}
	cl, err = c.Claim(ctx, workitems.ClaimRequest{Lanes: []string{"queries"}})
	if err != nil || cl == nil || cl.ID != "q1" || cl.Attempt != 1 {
		t.Fatalf("replayed claim = %+v, %v", cl, err)
	}
	if _, err := cl.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := cl.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		cl, err := c.Claim(ctx, workitems.ClaimRequest{Types: []string{"codebase"}})
		if err != nil || cl == nil || cl.ID != fmt.Sprintf("bg%d", i) {
			t.Fatalf("background claim %d = %+v, %v", i, cl, err)
		}
		if i == 0 {
			if err := cl.DeadLetter(ctx, "poison"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := cl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if cl, err := c.Claim(ctx, workitems.ClaimRequest{}); cl != nil || err != nil {
		t.Fatalf("empty claim = %+v, %v; want nil, nil", cl, err)
	}
}

func TestLeaseExpiryFencesStaleWorker(t *testing.T) {
	e := startEngine(t, work.Config{}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{})
	ctx := reqCtx(t)
	if _, err := c.Submit(ctx, workitems.Item{ID: "x", Type: "document"}); err != nil {
		t.Fatal(err)
	}
	stale, err := c.Claim(ctx, workitems.ClaimRequest{Lease: 150 * time.Millisecond})
	if err != nil || stale == nil {
		t.Fatalf("claim = %v, %v", stale, err)
	}
	fresh, err := c.Claim(ctx, workitems.ClaimRequest{Worker: "other", Wait: 10 * time.Second})
	if err != nil || fresh == nil || fresh.Attempt != 2 {
		t.Fatalf("redelivered claim = %+v, %v", fresh, err)
	}
	if err := stale.Ack(ctx); !errors.Is(err, workitems.ErrFenced) {
		t.Fatalf("stale Ack = %v, want ErrFenced", err)
	}
	if err := stale.KeepAlive(ctx, time.Millisecond); !errors.Is(err, workitems.ErrFenced) {
		t.Fatalf("stale KeepAlive = %v, want ErrFenced", err)
	}
	if err := fresh.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKeepAliveHoldsLease(t *testing.T) {
	e := startEngine(t, work.Config{Lease: time.Second}, admission.QoSConfig{})
	c := newClient(t, e.nc, workitems.Config{Lease: time.Second})
	ctx := reqCtx(t)
	if _, err := c.Submit(ctx, workitems.Item{ID: "long", Type: "deep_analysis"}); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Claim(ctx, workitems.ClaimRequest{})
	if err != nil || cl == nil {
		t.Fatal(cl, err)
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cl.KeepAlive(kctx, 200*time.Millisecond) }()
	// For 2.5 leases no other worker gets the item.
	if other, err := c.Claim(ctx, workitems.ClaimRequest{Worker: "other", Wait: 2500 * time.Millisecond}); err != nil || other != nil {
		t.Fatalf("claim while kept alive = %+v, %v", other, err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("KeepAlive = %v", err)
	}
	if !cl.Expires().After(cl.LeaseExpiresAt) {
		t.Fatalf("Expires %v not renewed past %v", cl.Expires(), cl.LeaseExpiresAt)
	}
	if err := cl.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is a pacing clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }

// TestPacingOnBusyEndToEnd runs the engine's QoS with a tiny capacity: one
// request in flight fills background's ceiling, so a background claim is
// shed and paced while interactive claims go through and are never paced.
func TestPacingOnBusyEndToEnd(t *testing.T) {
	e := startEngine(t, work.Config{}, admission.QoSConfig{Enabled: true, Capacity: 4, PrincipalQuota: 4})
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := newClient(t, e.nc, workitems.Config{Now: clk.now, Rand: func() float64 { return 0 }})
	ctx := reqCtx(t)
	if _, err := c.Submit(ctx, workitems.Item{ID: "i1", Type: "conversation"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, workitems.Item{ID: "b1", Type: "codebase"}); err != nil {
		t.Fatal(err)
	}
	// Hold one request in flight: a long-polling claim for a type that has
	// no work, published on the same connection ahead of the claims below,
	// so NATS delivers it to the engine's claim endpoint first.
	inbox := nats.NewInbox()
	sub, err := e.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	hold := nats.NewMsg("edict.work.claim")
	hold.Reply = inbox
	hold.Header.Set(priority.Header, "interactive")
	hold.Data = []byte(`{"worker":"holder","types":["nothing_here"],"wait_ms":1500}`)
	if err := e.nc.PublishMsg(hold); err != nil {
		t.Fatal(err)
	}
	bg := priority.With(ctx, priority.BackgroundIngestion)
	in := priority.With(ctx, priority.Interactive)
	_, shed := c.Claim(bg, workitems.ClaimRequest{Classes: []priority.Class{priority.BackgroundIngestion}})
	var ee *workitems.EngineError
	if !errors.As(shed, &ee) || ee.Code != 503 || !workitems.IsBusyShed(shed) {
		t.Fatalf("background claim under pressure = %v, want an engine BUSY", shed)
	}
	reached := engineClaims(t, e)
	_, err = c.Claim(bg, workitems.ClaimRequest{})
	want := "BUSY: client-side claim pacing active for class 'background_ingestion', retry after 0.125s (engine not contacted)"
	if err == nil || err.Error() != want {
		t.Fatalf("paced claim = %v, want %q", err, want)
	}
	if got := engineClaims(t, e); got != reached {
		t.Fatalf("paced claim reached the engine: %d → %d requests", reached, got)
	}
	// Interactive is never paced by background sheds.
	cl, err := c.Claim(in, workitems.ClaimRequest{Classes: []priority.Class{priority.Interactive}})
	if err != nil || cl == nil || cl.ID != "i1" {
		t.Fatalf("interactive claim while background paced = %+v, %v", cl, err)
	}
	if err := cl.Ack(in); err != nil {
		t.Fatal(err)
	}
	// The holder's long poll ends; its reply releases the permit.
	if m, err := sub.NextMsg(10 * time.Second); err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("holder reply = %v, %v", m, err)
	}
	clk.t = clk.t.Add(124 * time.Millisecond)
	if _, err := c.Claim(bg, workitems.ClaimRequest{}); err == nil || err.Error() != strings.Replace(want, "0.125s", "0.001s", 1) {
		t.Fatalf("claim 1 ms before the window ends = %v", err)
	}
	clk.t = clk.t.Add(time.Millisecond)
	got, err := c.Claim(bg, workitems.ClaimRequest{Classes: []priority.Class{priority.BackgroundIngestion}})
	if err != nil || got == nil || got.ID != "b1" {
		t.Fatalf("background claim after pressure = %+v, %v", got, err)
	}
	if s := c.Pacer().Snapshot()[priority.BackgroundIngestion]; s.ConsecutiveSheds != 0 {
		t.Fatalf("pacing not cleared: %+v", s)
	}
	_ = got.Ack(ctx)
}

// engineClaims returns how many claim requests the engine's work_claim
// endpoint has received, from $SRV.STATS.
func engineClaims(t *testing.T, e *engine) int {
	t.Helper()
	rep, err := e.nc.Request("$SRV.STATS.edict-engine", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Endpoints []struct {
			Name        string `json:"name"`
			NumRequests int    `json:"num_requests"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(rep.Data, &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		if ep.Name == "work_claim" {
			return ep.NumRequests
		}
	}
	t.Fatalf("no work_claim endpoint in %s", rep.Data)
	return 0
}

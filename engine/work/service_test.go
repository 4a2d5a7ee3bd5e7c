package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/priority"
)

// env is one real JetStream server and a Service on it.
type env struct {
	t   *testing.T
	js  jetstream.JetStream
	svc *Service
	cfg Config
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	s := natstest.Run(t, nil)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, js: js, cfg: cfg}
	e.open()
	return e
}

func (e *env) open() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second) // setup deadline
	defer cancel()
	svc, err := Open(ctx, e.js, e.cfg)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.svc = svc
	e.t.Cleanup(func() { _ = svc.Close() })
}

// do calls op with body and decodes the reply into out (when non-nil).
func (e *env) do(op string, body any, out any) error {
	e.t.Helper()
	return e.doAs(priority.Interactive, op, body, out)
}

func (e *env) doAs(ceiling priority.Class, op string, body any, out any) error {
	e.t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 15*time.Second) // one request's deadline
	defer cancel()
	v, err := e.svc.Handle(ctx, protocol.Request{Op: op, Caller: protocol.Caller{Principal: "test", Class: priority.Orchestration, Ceiling: ceiling}, Body: b})
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			e.t.Fatalf("%s: error %v is not a *protocol.Error", op, err)
		}
		return err
	}
	if out != nil {
		rb, err := json.Marshal(v)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(rb, out); err != nil {
			e.t.Fatalf("%s: reply %s: %v", op, rb, err)
		}
	}
	return nil
}

func (e *env) must(op string, body any, out any) {
	e.t.Helper()
	if err := e.do(op, body, out); err != nil {
		e.t.Fatalf("%s %v: %v", op, body, err)
	}
}

func (e *env) submit(id, typ, class string, extra map[string]any) submitReply {
	e.t.Helper()
	body := map[string]any{"type": typ, "payload": map[string]any{"n": id}}
	if id != "" {
		body["id"] = id
	}
	if class != "" {
		body["class"] = class
	}
	for k, v := range extra {
		body[k] = v
	}
	var r submitReply
	e.must("submit", body, &r)
	return r
}

func (e *env) claim(body map[string]any) claimReply {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["worker"]; !ok {
		body["worker"] = "w1"
	}
	var r claimReply
	e.must("claim", body, &r)
	return r
}

func codeOf(err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

func TestPriorityOrderUnderBackgroundBacklog(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range 40 {
		e.submit(fmt.Sprintf("bg-%02d", i), "codebase", "", nil)
	}
	e.submit("hy-1", "skill_workflows", "", nil)
	e.submit("or-1", "research_paper_fetch", "orchestration", nil)
	e.submit("in-1", "conversation", "", nil)
	e.submit("in-2", "kg_memory", "", nil)
	e.submit("bg-doc", "document", "", nil)

	want := []string{"in-1", "in-2", "or-1", "hy-1", "bg-00", "bg-01"}
	for _, id := range want {
		r := e.claim(nil)
		if !r.Claimed || r.ID != id {
			t.Fatalf("claim = %+v, want %s", r, id)
		}
	}
	// Within background, the type whose oldest message is oldest: codebase
	// (bg-02 …) before document.
	r := e.claim(map[string]any{"classes": []string{"background_ingestion"}})
	if r.ID != "bg-02" || r.Class != "background_ingestion" || r.Attempt != 1 || r.MaxAttempts != 3 {
		t.Fatalf("claim = %+v, want bg-02 attempt 1/3", r)
	}
	r = e.claim(map[string]any{"types": []string{"document"}})
	if r.ID != "bg-doc" {
		t.Fatalf("types filter claim = %+v, want bg-doc", r)
	}
	r = e.claim(map[string]any{"lanes": []string{"queries"}})
	if r.Claimed || r.Reason != "empty" {
		t.Fatalf("queries lane claim = %+v, want empty", r)
	}
}

func TestSubmitIdempotentAndClamped(t *testing.T) {
	e := newEnv(t, Config{})
	if r := e.submit("job-1", "conversation", "", nil); r.Duplicate || r.ID != "job-1" {
		t.Fatalf("first submit = %+v", r)
	}
	if r := e.submit("job-1", "conversation", "", nil); !r.Duplicate {
		t.Fatalf("second submit = %+v, want duplicate", r)
	}
	// A generated id.
	if r := e.submit("", "document", "", nil); len(r.ID) != 32 || r.Duplicate {
		t.Fatalf("generated id submit = %+v", r)
	}
	// Clamped to the caller's ceiling.
	var r submitReply
	if err := e.doAs(priority.BackgroundIngestion, "submit", map[string]any{"id": "clamped", "type": "conversation", "class": "interactive", "payload": 1}, &r); err != nil {
		t.Fatal(err)
	}
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if got := st.Classes["interactive"].Queued; got != 1 {
		t.Fatalf("interactive queued = %d, want 1 (stats %+v)", got, st)
	}
	if got := st.Classes["background_ingestion"].Queued; got != 2 {
		t.Fatalf("background queued = %d, want 2 (stats %+v)", got, st)
	}
	if got := st.Lanes["queries"].Queued; got != 2 { // lanes go by type, not class
		t.Fatalf("queries lane queued = %d, want 2", got)
	}
	c := e.claim(map[string]any{"classes": []string{"interactive"}})
	if c.ID != "job-1" || string(c.Payload) != `{"n":"job-1"}` {
		t.Fatalf("claim = %+v", c)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
	if r := e.submit("job-1", "conversation", "", nil); !r.Duplicate {
		t.Fatalf("submit after ack = %+v, want duplicate", r)
	}
	if c := e.claim(map[string]any{"classes": []string{"interactive"}}); c.Claimed {
		t.Fatalf("claim after ack = %+v, want empty", c)
	}
}

func TestLeaseExpiryRedeliveryFencesStaleToken(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		lease float64
	}{
		// JetStream's own AckWait expiry.
		{"ackwait", Config{Lease: 500 * time.Millisecond}, 0},
		// A lease shorter than AckWait, ended by the engine.
		{"shortened", Config{}, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			e.submit("lease-1", "conversation", "", map[string]any{"max_attempts": 3})
			first := e.claim(map[string]any{"lease_seconds": tt.lease})
			if !first.Claimed || first.Attempt != 1 {
				t.Fatalf("first claim = %+v", first)
			}
			// Long-poll until the expired lease is redelivered.
			second := e.claim(map[string]any{"worker": "w2", "wait_ms": 10000})
			if !second.Claimed || second.ID != "lease-1" || second.Attempt != 2 {
				t.Fatalf("second claim = %+v, want lease-1 attempt 2", second)
			}
			for _, op := range []string{"ack", "extend", "retry", "dead"} {
				body := map[string]any{"token": first.Token}
				if op == "dead" {
					body["reason"] = "x"
				}
				if err := e.do(op, body, nil); codeOf(err) != 409 || err.(*protocol.Error).Text != "FENCED: stale lease token" {
					t.Fatalf("%s with stale token: %v, want 409 FENCED", op, err)
				}
			}
			if err := e.do("defer", map[string]any{"token": first.Token, "delay_ms": 0}, nil); codeOf(err) != 409 {
				t.Fatalf("defer with stale token: %v, want 409", err)
			}
			e.must("ack", map[string]any{"token": second.Token}, nil)
			if err := e.do("ack", map[string]any{"token": second.Token}, nil); codeOf(err) != 409 {
				t.Fatalf("second ack: %v, want 409", err)
			}
			var st statsReply
			e.must("stats", map[string]any{}, &st)
			if c := st.Classes["interactive"]; c.Queued != 0 || c.InFlight != 0 || c.Dead != 0 {
				t.Fatalf("stats after ack = %+v", st)
			}
		})
	}
}

func TestExtendKeepsLease(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("ext", "conversation", "", nil)
	c := e.claim(map[string]any{"lease_seconds": 30})
	var x extendReply
	e.must("extend", map[string]any{"token": c.Token, "lease_seconds": 45}, &x)
	got, err := time.Parse(time.RFC3339, x.LeaseExpiresAt)
	if err != nil || got.Sub(time.Now()) < 40*time.Second || got.Location() != time.UTC {
		t.Fatalf("extend lease_expires_at = %q (%v)", x.LeaseExpiresAt, err)
	}
	if r := e.claim(nil); r.Claimed {
		t.Fatalf("claim while leased = %+v", r)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
}

func TestDeferConsumesNoAttempt(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("def", "conversation", "", map[string]any{"max_attempts": 1})
	for i := range 4 {
		c := e.claim(map[string]any{"wait_ms": 5000})
		if !c.Claimed || c.Attempt != 1 || c.MaxAttempts != 1 {
			t.Fatalf("claim %d = %+v, want attempt 1/1", i, c)
		}
		var d deferReply
		if i%2 == 0 {
			e.must("defer", map[string]any{"token": c.Token, "delay_ms": 10, "reason": "admission_denied"}, &d)
		} else {
			e.must("defer", map[string]any{"token": c.Token, "until": time.Now().Add(20 * time.Millisecond).UTC().Format(time.RFC3339Nano)}, &d)
		}
		if _, err := time.Parse(time.RFC3339, d.NextAt); err != nil {
			t.Fatalf("next_at %q: %v", d.NextAt, err)
		}
	}
	c := e.claim(map[string]any{"wait_ms": 5000})
	if c.Attempt != 1 {
		t.Fatalf("claim after defers = %+v, want attempt 1", c)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
}

func TestRetryThenDeadLetterThenReplay(t *testing.T) {
	e := newEnv(t, Config{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond})
	e.submit("rt", "document", "", map[string]any{"max_attempts": 2, "tenant": "acme"})
	c := e.claim(map[string]any{"wait_ms": 5000})
	var rr retryReply
	e.must("retry", map[string]any{"token": c.Token, "error": "boom"}, &rr)
	if rr.Dead || rr.NextAt == "" {
		t.Fatalf("first retry = %+v", rr)
	}
	c = e.claim(map[string]any{"wait_ms": 5000})
	if c.Attempt != 2 {
		t.Fatalf("second claim = %+v, want attempt 2", c)
	}
	e.must("retry", map[string]any{"token": c.Token, "error": "boom"}, &rr)
	if !rr.Dead {
		t.Fatalf("last retry = %+v, want dead", rr)
	}
	if r := e.claim(nil); r.Claimed {
		t.Fatalf("claim after dead letter = %+v", r)
	}
	var dl deadListReply
	e.must("dead_list", map[string]any{}, &dl)
	if len(dl.Items) != 1 || dl.Items[0].ID != "rt" || dl.Items[0].Attempts != 2 || dl.Items[0].Reason != "attempts_exhausted" || dl.Items[0].Tenant != "acme" || dl.Next != "" {
		t.Fatalf("dead_list = %+v", dl)
	}
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if st.Classes["background_ingestion"].Dead != 1 {
		t.Fatalf("stats = %+v, want one dead", st)
	}
	var rp deadReplayReply
	e.must("dead_replay", map[string]any{"ids": []string{"rt", "unknown"}}, &rp)
	if rp.Replayed != 1 {
		t.Fatalf("dead_replay = %+v", rp)
	}
	e.must("dead_list", map[string]any{}, &dl)
	if len(dl.Items) != 0 {
		t.Fatalf("dead_list after replay = %+v", dl)
	}
	c = e.claim(map[string]any{"wait_ms": 5000})
	if !c.Claimed || c.ID != "rt" || c.Attempt != 1 || c.MaxAttempts != 2 || c.Tenant != "acme" {
		t.Fatalf("claim after replay = %+v, want rt attempt 1/2", c)
	}
	e.must("dead", map[string]any{"token": c.Token, "reason": "poison"}, nil)
	e.must("dead_list", map[string]any{"class": "background_ingestion"}, &dl)
	if len(dl.Items) != 1 || dl.Items[0].Reason != "poison" || dl.Items[0].Attempts != 1 {
		t.Fatalf("dead_list after dead = %+v", dl)
	}
	e.must("dead_list", map[string]any{"class": "interactive"}, &dl)
	if len(dl.Items) != 0 {
		t.Fatalf("interactive dead_list = %+v", dl)
	}
}

func TestDeadListPages(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range 5 {
		e.submit(fmt.Sprintf("d%d", i), "document", "", nil)
		c := e.claim(nil)
		e.must("dead", map[string]any{"token": c.Token, "reason": "r"}, nil)
	}
	var ids []string
	after := ""
	for range 5 {
		var dl deadListReply
		e.must("dead_list", map[string]any{"limit": 2, "after": after}, &dl)
		for _, it := range dl.Items {
			ids = append(ids, it.ID)
		}
		if dl.Next == "" {
			break
		}
		after = dl.Next
	}
	if fmt.Sprint(ids) != "[d0 d1 d2 d3 d4]" {
		t.Fatalf("paged ids = %v", ids)
	}
}

func TestExpiredLeasesExhaustAttempts(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("ex", "conversation", "", map[string]any{"max_attempts": 1})
	c := e.claim(map[string]any{"lease_seconds": 0.1})
	if !c.Claimed {
		t.Fatal("not claimed")
	}
	// The redelivery after the expired lease would be attempt 2 of 1: it is
	// dead-lettered instead of handed out. Long-poll past the expiry.
	r := e.claim(map[string]any{"wait_ms": 1000})
	if r.Claimed {
		t.Fatalf("claim = %+v, want nothing", r)
	}
	var dl deadListReply
	e.must("dead_list", map[string]any{}, &dl)
	if len(dl.Items) != 1 || dl.Items[0].Reason != "lease_exhausted" || dl.Items[0].Attempts != 1 {
		t.Fatalf("dead_list = %+v", dl)
	}
}

func TestTenantQuota(t *testing.T) {
	e := newEnv(t, Config{TenantQuota: 1, QuotaDelay: 50 * time.Millisecond})
	e.submit("a1", "document", "", map[string]any{"tenant": "a"})
	e.submit("a2", "document", "", map[string]any{"tenant": "a"})
	c1 := e.claim(nil)
	if c1.ID != "a1" {
		t.Fatalf("claim = %+v", c1)
	}
	if r := e.claim(nil); r.Claimed || r.Reason != "tenant_quota" {
		t.Fatalf("claim at quota = %+v, want tenant_quota", r)
	}
	e.submit("b1", "document", "", map[string]any{"tenant": "b"})
	if r := e.claim(nil); r.ID != "b1" {
		t.Fatalf("other tenant claim = %+v, want b1", r)
	}
	e.must("ack", map[string]any{"token": c1.Token}, nil)
	r := e.claim(map[string]any{"wait_ms": 5000})
	if r.ID != "a2" || r.Attempt != 1 {
		t.Fatalf("claim after release = %+v, want a2 attempt 1 (put-back is a defer)", r)
	}
}

func TestTokenSurvivesRestart(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("rs", "conversation", "", nil)
	c := e.claim(nil)
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.do("stats", "{}", nil); codeOf(err) != 503 {
		t.Fatalf("Handle after Close: %v, want 503", err)
	}
	e.open()
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if st.Classes["interactive"].InFlight != 1 {
		t.Fatalf("rebuilt stats = %+v, want one in flight", st)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
	if r := e.claim(nil); r.Claimed {
		t.Fatalf("claim after ack = %+v", r)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("ok", "conversation", "", nil)
	c := e.claim(map[string]any{})
	forged := encodeToken(make([]byte, 32), grant{ID: "ok", Seq: 1, Delivered: 1})
	tests := []struct {
		op   string
		body string
		code int
	}{
		{"submit", `{"type":"conversation","payload":1,"extra":1}`, 400},
		{"submit", `{"type":"a.b","payload":1}`, 400},
		{"submit", `{"type":"","payload":1}`, 400},
		{"submit", `{"type":"x","class":"urgent","payload":1}`, 400},
		{"submit", `{"type":"x","max_attempts":-1}`, 400},
		{"submit", `{"type":"x","id":"a.b"}`, 400},
		{"submit", `{"type":"x"} {}`, 400},
		{"submit", `[`, 400},
		{"claim", `{}`, 400},
		{"claim", `{"worker":"w","classes":["nope"]}`, 400},
		{"claim", `{"worker":"w","lanes":["nope"]}`, 400},
		{"claim", `{"worker":"w","lease_seconds":-1}`, 400},
		{"claim", `{"worker":"w","wait_ms":-1}`, 400},
		{"ack", `{"token":"garbage"}`, 400},
		{"ack", `{"token":""}`, 400},
		{"ack", fmt.Sprintf(`{"token":%q}`, forged), 400},
		{"ack", fmt.Sprintf(`{"token":%q,"x":1}`, c.Token), 400},
		{"defer", fmt.Sprintf(`{"token":%q}`, c.Token), 400},
		{"defer", fmt.Sprintf(`{"token":%q,"delay_ms":1,"until":"2030-01-01T00:00:00Z"}`, c.Token), 400},
		{"defer", fmt.Sprintf(`{"token":%q,"until":"tomorrow"}`, c.Token), 400},
		{"dead", fmt.Sprintf(`{"token":%q}`, c.Token), 400},
		{"dead_list", `{"limit":-1}`, 400},
		{"dead_list", `{"after":"x"}`, 400},
		{"dead_list", `{"class":"x"}`, 400},
		{"dead_replay", `{"ids":[]}`, 400},
		{"dead_replay", `{"ids":["a b"]}`, 400},
		{"stats", `{"x":1}`, 400},
		{"nope", `{}`, 404},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+tt.body, func(t *testing.T) {
			if err := e.do(tt.op, tt.body, nil); codeOf(err) != tt.code {
				t.Fatalf("%s %s: %v, want %d", tt.op, tt.body, err, tt.code)
			}
		})
	}
	// Nothing changed: the lease still settles.
	e.must("ack", map[string]any{"token": c.Token}, nil)
}

func TestOps(t *testing.T) {
	e := newEnv(t, Config{})
	want := "[submit claim ack retry defer extend dead dead_list dead_replay stats]"
	if got := fmt.Sprint(e.svc.Ops()); got != want {
		t.Fatalf("Ops = %s, want %s", got, want)
	}
}

// TestSettledRecordsExpire checks that the bucket is bounded: an acked
// item's record carries the DedupWindow as its per-message TTL (JetStream
// removes it then), a live item's record carries none, and the re-submit
// of an acked id inside the window is still a duplicate.
func TestSettledRecordsExpire(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		want   time.Duration
	}{
		{"default", 0, DefaultDedupWindow},
		{"raised to the stream's duplicates window", time.Second, MinDedupWindow},
		{"as configured", 3 * time.Hour, 3 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{DedupWindow: tt.window})
			e.submit("ttl-1", "conversation", "", nil)
			ttlOf := func() string {
				t.Helper()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // one lookup's deadline
				defer cancel()
				st, err := e.js.Stream(ctx, "KV_"+StateBucket)
				if err != nil {
					t.Fatal(err)
				}
				m, err := st.GetLastMsgForSubject(ctx, "$KV."+StateBucket+"."+itemKey("ttl-1"))
				if err != nil {
					t.Fatal(err)
				}
				return m.Header.Get(jetstream.MsgTTLHeader)
			}
			if got := ttlOf(); got != "" {
				t.Fatalf("queued record TTL = %q, want none", got)
			}
			c := e.claim(nil)
			if got := ttlOf(); got != "" {
				t.Fatalf("leased record TTL = %q, want none", got)
			}
			e.must("ack", map[string]any{"token": c.Token}, nil)
			if got := ttlOf(); got != tt.want.String() {
				t.Fatalf("acked record TTL = %q, want %q", got, tt.want)
			}
			if r := e.submit("ttl-1", "conversation", "", nil); !r.Duplicate {
				t.Fatalf("re-submit inside the window = %+v, want duplicate", r)
			}
		})
	}
}

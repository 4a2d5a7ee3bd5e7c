package work

import (
	"context"
	"sync"
	"testing"
	"time"
)

// storedRecord reads id's record from the bucket, not the cache.
func (e *env) storedRecord(id string) record {
	e.t.Helper()
	rec, _, found, err := e.svc.loadRecord(e.t.Context(), id)
	if err != nil || !found {
		e.t.Fatalf("record %s: found %v, %v", id, found, err)
	}
	return rec
}

// warm moves e's service past its first Lease after Open, when every
// grant is recorded.
func (e *env) warm(svcs ...*Service) {
	for _, s := range append(svcs, e.svc) {
		s.openedAt = s.openedAt.Add(-s.cfg.Lease)
	}
}

func (e *env) leaseOf(id string) (lease, bool) {
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	l := e.svc.leases[id]
	if l == nil {
		return lease{}, false
	}
	return *l, true
}

func TestUnrecordedGrantIsRecordedWhenHeld(t *testing.T) {
	e := newEnv(t, Config{RecordAfter: time.Hour}) // the timer never fires here; the test records by hand
	e.warm()
	e.submit("u1", "conversation", "", nil)
	c := e.claim(nil) // the full lease: unrecorded
	if rec := e.storedRecord("u1"); rec.State != stateQueued || rec.Delivered != 0 {
		t.Fatalf("record after a first full-lease claim = %+v, want queued and never delivered", rec)
	}
	l, ok := e.leaseOf("u1")
	if !ok || !l.unrecorded || l.timer == nil {
		t.Fatalf("lease = %+v (%v), want unrecorded with its recording timer", l, ok)
	}
	e.svc.recordGrant(t.Context(), "u1", 1)
	rec := e.storedRecord("u1")
	if rec.State != stateLeased || rec.Delivered != 1 || rec.Reply == "" || rec.LeaseUntil.UnixMilli() != mustGrant(t, e, c.Token).LeaseUntil {
		t.Fatalf("recorded grant = %+v, want leased delivery 1 with the token's reply and expiry", rec)
	}
	if l, _ := e.leaseOf("u1"); l.unrecorded {
		t.Fatal("lease still marked unrecorded after recording")
	}
	// Recording is idempotent and the token settles the recorded grant.
	e.svc.recordGrant(t.Context(), "u1", 1)
	e.must("ack", map[string]any{"token": c.Token}, nil)
	if rec := e.storedRecord("u1"); rec.State != stateAcked {
		t.Fatalf("record after ack = %+v", rec)
	}
}

func mustGrant(t *testing.T, e *env, token string) grant {
	t.Helper()
	g, err := verifyToken(e.svc.key, token)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestShortenedAndRedeliveredGrantsAreRecorded(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("s1", "conversation", "", nil)
	c := e.claim(map[string]any{"lease_seconds": 30})
	if rec := e.storedRecord("s1"); rec.State != stateLeased || rec.Delivered != 1 {
		t.Fatalf("record after a shortened claim = %+v, want leased", rec)
	}
	// A deferred item's next delivery is a redelivery: recorded.
	e.must("defer", map[string]any{"token": c.Token, "delay_ms": 0}, nil)
	c2 := e.claim(map[string]any{"wait_ms": 5000})
	if !c2.Claimed || c2.Attempt != 1 {
		t.Fatalf("claim after defer = %+v", c2)
	}
	if rec := e.storedRecord("s1"); rec.State != stateLeased || rec.Delivered != 2 {
		t.Fatalf("record after a redelivery = %+v, want leased delivery 2", rec)
	}
	e.must("ack", map[string]any{"token": c2.Token}, nil)
}

func TestUnrecordedGrantExpiresByTheToken(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, Config{Now: clock, RecordAfter: time.Hour})
	e.warm()
	e.submit("x1", "conversation", "", nil)
	c := e.claim(nil)
	mu.Lock()
	now = now.Add(DefaultLease + time.Second)
	mu.Unlock()
	for _, op := range []string{"ack", "extend"} {
		if err := e.do(op, map[string]any{"token": c.Token}, nil); codeOf(err) != 409 {
			t.Fatalf("%s after the token's lease ran out: %v, want 409", op, err)
		}
	}
	if rec := e.storedRecord("x1"); rec.State != stateQueued {
		t.Fatalf("record after fenced settles = %+v, want unchanged", rec)
	}
}

// Another engine on the same JetStream settles a grant this one did not
// record: the token carries what it needs, and the record's
// compare-and-set fences the first engine afterwards.
func TestUnrecordedGrantSettledByAnotherEngine(t *testing.T) {
	e := newEnv(t, Config{RecordAfter: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	other, err := Open(ctx, e.js, Config{RecordAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	first := e.svc
	e.warm(other)

	e.submit("o1", "conversation", "", nil)
	e.submit("o2", "conversation", "", nil)
	c1 := e.claim(nil)
	c2 := e.claim(nil)
	if !c1.Claimed || !c2.Claimed {
		t.Fatalf("claims = %+v %+v", c1, c2)
	}

	e.svc = other
	e.must("ack", map[string]any{"token": c1.Token}, nil)
	var x extendReply
	e.must("extend", map[string]any{"token": c2.Token}, &x)
	if rec := e.storedRecord(c2.ID); rec.State != stateLeased || rec.Delivered != 1 {
		t.Fatalf("record after another engine's extend = %+v, want leased", rec)
	}

	e.svc = first
	if err := e.do("ack", map[string]any{"token": c1.Token}, nil); codeOf(err) != 409 {
		t.Fatalf("ack of an item another engine acked: %v, want 409", err)
	}
	e.must("ack", map[string]any{"token": c2.Token}, nil)
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if q := st.Classes["interactive"].Queued; q != 0 {
		t.Fatalf("queued after both acks = %d", q)
	}
}

func TestAckWithNext(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("n-bg", "codebase", "", nil)
	e.submit("n-i1", "conversation", "", nil)
	e.submit("n-i2", "conversation", "", nil)
	c := e.claim(map[string]any{"types": []string{"conversation"}})
	if c.ID != "n-i1" {
		t.Fatalf("first claim = %+v", c)
	}

	// A bad next is refused before anything changes: the token still acks.
	for _, next := range []map[string]any{
		{"worker": "w", "wait_ms": 10},
		{"worker": "w", "classes": []string{"nope"}},
		{"classes": []string{"interactive"}},
	} {
		if err := e.do("ack", map[string]any{"token": c.Token, "next": next}, nil); codeOf(err) != 400 {
			t.Fatalf("ack with next %v: %v, want 400", next, err)
		}
	}

	var r ackReply
	e.must("ack", map[string]any{"token": c.Token, "next": map[string]any{"worker": "w"}}, &r)
	if r.NextError != nil || r.Next == nil || !r.Next.Claimed || r.Next.ID != "n-i2" || r.Next.Attempt != 1 {
		t.Fatalf("ack with next = %+v, want the next interactive item", r)
	}
	if rec := e.storedRecord("n-i1"); rec.State != stateAcked {
		t.Fatalf("acked record = %+v", rec)
	}
	// The next item came from the acked one's queue ("+NXT"): by the reply
	// JetStream has removed the acked item.
	var st0 statsReply
	e.must("stats", map[string]any{}, &st0)
	if i := st0.Classes["interactive"]; i.Queued != 0 || i.InFlight != 1 {
		t.Fatalf("stats right after an ack with next = %+v, want 0 queued, 1 in flight", i)
	}
	// A stale token with next acks nothing and claims nothing.
	if err := e.do("ack", map[string]any{"token": c.Token, "next": map[string]any{"worker": "w"}}, nil); codeOf(err) != 409 {
		t.Fatalf("ack with next of an acked token: %v, want 409", err)
	}
	var r2 ackReply
	e.must("ack", map[string]any{"token": r.Next.Token, "next": map[string]any{"worker": "w", "types": []string{"conversation"}}}, &r2)
	if r2.Next == nil || r2.Next.Claimed || r2.Next.Reason != "empty" {
		t.Fatalf("ack with next on an empty filter = %+v, want claimed:false empty", r2)
	}
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if i, b := st.Classes["interactive"], st.Classes["background_ingestion"]; i.Queued != 0 || i.InFlight != 0 || b.Queued != 1 {
		t.Fatalf("stats = %+v, want the interactive items gone and the background one queued", st)
	}
	// A plain ack answers {} as before.
	c3 := e.claim(nil)
	var plain map[string]any
	e.must("ack", map[string]any{"token": c3.Token}, &plain)
	if len(plain) != 0 {
		t.Fatalf("plain ack = %v, want {}", plain)
	}
}

// An ack with next whose next item is in another queue sends the +ACK on
// its own.
func TestAckWithNextOtherQueue(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("q-bg", "codebase", "", nil)
	c := e.claim(nil)
	if c.ID != "q-bg" {
		t.Fatalf("claim = %+v", c)
	}
	e.submit("q-int", "conversation", "", nil)
	var r ackReply
	e.must("ack", map[string]any{"token": c.Token, "next": map[string]any{"worker": "w"}}, &r)
	if r.Next == nil || r.Next.ID != "q-int" {
		t.Fatalf("ack with next = %+v, want the interactive item", r)
	}
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if b, i := st.Classes["background_ingestion"], st.Classes["interactive"]; b.Queued != 0 || b.InFlight != 0 || i.InFlight != 1 {
		t.Fatalf("stats = %+v, want the background item gone and the interactive one in flight", st)
	}
	e.must("ack", map[string]any{"token": r.Next.Token}, nil)
}

// For one Lease after Open every grant is recorded, and a recorded grant
// fences any token whose reply subject is not the record's: JetStream
// repeats a delivery count after losing its consumer state in a crash.
func TestGrantsRecordedAfterOpenAndFencedByReply(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("w1", "conversation", "", nil)
	c := e.claim(nil)
	rec := e.storedRecord("w1")
	if rec.State != stateLeased || rec.Delivered != 1 {
		t.Fatalf("record of a first claim right after Open = %+v, want the grant recorded", rec)
	}
	// The same delivery count granted again under another reply subject,
	// as the record of a repeated first delivery reads.
	unlock := e.svc.lock("w1")
	rec, rev, _, err := e.svc.getRecord(t.Context(), "w1", true)
	if err == nil {
		rec.Reply += ".again"
		_, err = e.svc.updateRecord(t.Context(), rec, rev)
	}
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.do("ack", map[string]any{"token": c.Token}, nil); codeOf(err) != 409 {
		t.Fatalf("ack of a token whose delivery was granted again: %v, want 409", err)
	}
}

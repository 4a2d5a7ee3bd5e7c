package work

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edictrt/edict/priority"
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

// another opens a second engine on e's JetStream, closed when the test ends.
func (e *env) another(cfg Config) *Service {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second) // setup deadline
	defer cancel()
	svc, err := Open(ctx, e.js, cfg)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// warm moves e's service past its first Lease after Open, when every
// grant is recorded.
func (e *env) warm(svcs ...*Service) {
	for _, s := range append(svcs, e.svc) {
		s.mu.Lock()
		s.openedAt = s.openedAt.Add(-s.cfg.Lease)
		s.mu.Unlock()
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
	other := e.another(Config{RecordAfter: time.Hour})
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
	if n := e.svc.ackNexts.Load(); n != 1 {
		t.Fatalf("acks sent as +NXT = %d, want 1", n)
	}
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
	if n := e.svc.ackNexts.Load(); n != 0 {
		t.Fatalf("acks sent as +NXT = %d, want 0 (the next item is in another queue)", n)
	}
	var st statsReply
	e.must("stats", map[string]any{}, &st)
	if b, i := st.Classes["background_ingestion"], st.Classes["interactive"]; b.Queued != 0 || b.InFlight != 0 || i.InFlight != 1 {
		t.Fatalf("stats = %+v, want the background item gone and the interactive one in flight", st)
	}
	e.must("ack", map[string]any{"token": r.Next.Token}, nil)
}

// For one Lease after Open every grant is recorded, and a recorded grant
// fences any token whose nonce is not the record's: JetStream repeats a
// delivery count, even a reply subject, after losing its consumer state.
func TestGrantsRecordedAfterOpenAndFencedByNonce(t *testing.T) {
	e := newEnv(t, Config{})
	e.submit("w1", "conversation", "", nil)
	c := e.claim(nil)
	rec := e.storedRecord("w1")
	if rec.State != stateLeased || rec.Delivered != 1 {
		t.Fatalf("record of a first claim right after Open = %+v, want the grant recorded", rec)
	}
	// The same delivery, reply subject and all, granted again, as the
	// record of a repeated first delivery reads.
	unlock := e.svc.lock("w1")
	rec, rev, _, err := e.svc.getRecord(t.Context(), "w1", true)
	if err == nil {
		rec.Nonce++
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

// A stale cache must not fence a live lease: the worker extended it through
// another engine, then acks through this one after the original expiry.
func TestStaleCacheDoesNotFenceExtendedLease(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	for _, warm := range []bool{false, true} {
		e := newEnv(t, Config{Now: clock, RecordAfter: time.Hour})
		other := e.another(Config{Now: clock, RecordAfter: time.Hour})
		if warm {
			e.warm(other)
		}
		first := e.svc
		id := fmt.Sprintf("st-%v", warm)
		e.submit(id, "conversation", "", nil)
		c := e.claim(nil) // cached on the first engine
		mu.Lock()
		now = now.Add(DefaultLease / 2)
		mu.Unlock()
		e.svc = other
		e.must("extend", map[string]any{"token": c.Token}, nil)
		mu.Lock()
		now = now.Add(DefaultLease * 3 / 4) // past the claim's lease, inside the extension
		mu.Unlock()
		e.svc = first
		if err := e.do("ack", map[string]any{"token": c.Token}, nil); err != nil {
			t.Fatalf("warm=%v: ack of an extended lease on the engine with the stale cache: %v", warm, err)
		}
	}
}

// A claim racing a submit on another engine (the record has no sequence
// yet) records its grant, so every engine can settle it.
func TestGrantOfUnsequencedRecordIsRecorded(t *testing.T) {
	e := newEnv(t, Config{RecordAfter: time.Hour})
	e.warm()
	e.submit("seq0", "conversation", "", nil)
	// Take the record back to "no sequence yet", as between a submit's
	// publish and its write of the sequence.
	unlock := e.svc.lock("seq0")
	rec, rev, _, err := e.svc.getRecord(t.Context(), "seq0", true)
	if err == nil {
		rec.Seq = 0
		_, err = e.svc.updateRecord(t.Context(), rec, rev)
	}
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	c := e.claim(nil)
	if rec := e.storedRecord("seq0"); rec.State != stateLeased || rec.Seq == 0 {
		t.Fatalf("record after claiming an unsequenced item = %+v, want the grant recorded with its sequence", rec)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
}

// After the connection finds another server, grants are recorded again
// for one Lease and the record cache is dropped.
func TestServerChangeRestartsRecording(t *testing.T) {
	e := newEnv(t, Config{RecordAfter: time.Hour})
	e.warm()
	e.submit("sc1", "conversation", "", nil)
	e.svc.cmu.Lock()
	cached := len(e.svc.recs)
	e.svc.cmu.Unlock()
	if cached == 0 {
		t.Fatal("submit cached nothing")
	}
	e.svc.mu.Lock()
	e.svc.serverID = "a server that is gone"
	e.svc.mu.Unlock()
	before := time.Now()
	e.svc.checkServer(time.Now())
	e.svc.cmu.Lock()
	cached = len(e.svc.recs)
	e.svc.cmu.Unlock()
	if cached != 0 {
		t.Fatalf("%d records still cached after a change of server", cached)
	}
	c := e.claim(nil)
	if rec := e.storedRecord("sc1"); rec.State != stateLeased {
		t.Fatalf("record after a claim on a new server = %+v, want the grant recorded", rec)
	}
	e.svc.mu.Lock()
	opened := e.svc.openedAt
	e.svc.mu.Unlock()
	if opened.Before(before) {
		t.Fatalf("recording window starts %v, before the change of server at %v", opened, before)
	}
	e.must("ack", map[string]any{"token": c.Token}, nil)
}

// JetStream delivers a message again as a first delivery after losing the
// consumer's state (here: the consumer is recreated). An engine in its
// recording window (after Open or a change of server) records the repeated
// grant with a new nonce, and the older token is fenced.
func TestRepeatedFirstDeliveryFencesOlderToken(t *testing.T) {
	e := newEnv(t, Config{RecordAfter: time.Hour})
	e.warm()
	e.submit("r1", "conversation", "", nil)
	c1 := e.claim(nil)
	ctx := t.Context()
	p := pair{priority.Interactive, "conversation"}
	if err := e.js.DeleteConsumer(ctx, StreamName, p.consumerName()); err != nil {
		t.Fatal(err)
	}
	restarted := e.another(Config{RecordAfter: time.Hour}) // recreates the consumer
	first := e.svc
	e.svc = restarted
	if _, err := restarted.ensureConsumer(ctx, p); err != nil {
		t.Fatal(err)
	}
	c2 := e.claim(map[string]any{"wait_ms": 5000})
	if !c2.Claimed || c2.ID != "r1" || c2.Attempt != 1 {
		t.Fatalf("claim after the consumer lost its state = %+v, want r1 delivered again as attempt 1", c2)
	}
	// On the engine that granted it (its cache still holds the first
	// grant) and on the one that granted it again.
	e.svc = first
	if err := e.do("ack", map[string]any{"token": c1.Token}, nil); codeOf(err) != 409 {
		t.Fatalf("ack of the older token on its own engine: %v, want 409", err)
	}
	e.svc = restarted
	if err := e.do("extend", map[string]any{"token": c1.Token}, nil); codeOf(err) != 409 {
		t.Fatalf("extend of the older token: %v, want 409", err)
	}
	e.must("ack", map[string]any{"token": c2.Token}, nil)
}

// An item queued through another engine is claimed before a lower class
// this engine knows of: stale counts are re-read.
func TestPriorityAcrossEngines(t *testing.T) {
	e := newEnv(t, Config{})
	other := e.another(Config{})
	first := e.svc
	e.submit("bg", "codebase", "", nil)
	e.svc = other
	e.submit("int", "conversation", "", nil)
	e.svc = first
	first.qmu.Lock()
	first.q.at = first.q.at.Add(-countsMaxAge) // as if the counts were read a while ago
	first.qmu.Unlock()
	if c := e.claim(nil); c.ID != "int" {
		t.Fatalf("claim = %s (%s), want the interactive item queued through the other engine", c.ID, c.Class)
	}
}

// A dead-letter request decided on a stale cached record leaves no stray
// dead letter: not when it then succeeds on the stored record, not when
// the stored record fences it.
func TestNoStrayDeadLetterFromStaleCache(t *testing.T) {
	e := newEnv(t, Config{})
	other := e.another(Config{})
	first := e.svc

	e.submit("sd1", "conversation", "", nil)
	e.submit("sd2", "conversation", "", nil)
	c1 := e.claim(nil) // recorded (inside the first lease after Open), cached on first
	c2 := e.claim(nil)
	e.svc = other
	e.must("extend", map[string]any{"token": c1.Token}, nil) // first's cache is stale now
	e.must("ack", map[string]any{"token": c2.Token}, nil)    // and the item is settled

	e.svc = first
	e.must("dead", map[string]any{"token": c1.Token, "reason": "poison"}, nil)
	if err := e.do("dead", map[string]any{"token": c2.Token, "reason": "poison"}, nil); codeOf(err) != 409 {
		t.Fatalf("dead of an item another engine acked: %v, want 409", err)
	}
	var dl deadListReply
	e.must("dead_list", map[string]any{}, &dl)
	if len(dl.Items) != 1 || dl.Items[0].ID != c1.ID {
		t.Fatalf("dead_list = %+v, want exactly the one dead item", dl)
	}
}

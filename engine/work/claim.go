package work

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// maxTakesPerQueue bounds the deliveries one claim inspects in one queue
// (stale copies, exhausted items, tenant put-backs) before moving on.
const maxTakesPerQueue = 16

// claimFilter is a validated claim request.
type claimFilter struct {
	worker  string
	classes map[priority.Class]bool
	lanes   map[string]bool
	types   map[string]bool
	lease   time.Duration
	wait    time.Duration
}

func (f claimFilter) allows(p pair) bool {
	if len(f.classes) > 0 && !f.classes[p.class] {
		return false
	}
	if len(f.lanes) > 0 && !f.lanes[priority.LaneOf(p.typ)] {
		return false
	}
	if len(f.types) > 0 && !f.types[p.typ] {
		return false
	}
	return true
}

// leaseFor converts a lease_seconds value: 0 is the full lease, negative
// is a 400, anything above the consumers' AckWait is capped to it.
func (s *Service) leaseFor(seconds float64) (time.Duration, error) {
	if seconds < 0 || seconds != seconds {
		return 0, protocol.BadRequest("invalid lease_seconds %v", seconds)
	}
	if seconds == 0 {
		return s.cfg.Lease, nil
	}
	d := time.Duration(seconds * float64(time.Second))
	if d <= 0 || d > s.cfg.Lease || seconds > s.cfg.Lease.Seconds() {
		d = s.cfg.Lease
	}
	return d, nil
}

func (s *Service) parseClaim(in claimRequest) (claimFilter, error) {
	f := claimFilter{worker: in.Worker}
	if in.Worker == "" || len(in.Worker) > 256 {
		return f, protocol.BadRequest("worker is required (at most 256 bytes)")
	}
	for _, c := range in.Classes {
		cls, err := priority.Parse(c)
		if err != nil {
			return f, protocol.BadRequest("unknown class %q", c)
		}
		if f.classes == nil {
			f.classes = make(map[priority.Class]bool)
		}
		f.classes[cls] = true
	}
	known := priority.LaneNames()
	for _, l := range in.Lanes {
		if !slices.Contains(known, l) {
			return f, protocol.BadRequest("unknown lane %q", l)
		}
		if f.lanes == nil {
			f.lanes = make(map[string]bool)
		}
		f.lanes[l] = true
	}
	for _, t := range in.Types {
		if !protocol.ValidName(t) {
			return f, protocol.BadRequest("invalid type %q", t)
		}
		if f.types == nil {
			f.types = make(map[string]bool)
		}
		f.types[t] = true
	}
	var err error
	if f.lease, err = s.leaseFor(in.LeaseSeconds); err != nil {
		return f, err
	}
	if in.WaitMS < 0 {
		return f, protocol.BadRequest("invalid wait_ms %d", in.WaitMS)
	}
	f.wait = min(time.Duration(in.WaitMS)*time.Millisecond, MaxWait)
	return f, nil
}

func (s *Service) claim(ctx context.Context, req protocol.Request) (any, error) {
	var in claimRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	f, err := s.parseClaim(in)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(f.wait)
	for {
		rep, err := s.claimOnce(ctx, f, nil)
		if err != nil || rep.Claimed || f.wait <= 0 {
			return rep, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return rep, nil
		}
		t := time.NewTimer(min(left, s.cfg.PollInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// candidates returns the queues the filter allows that may hold an
// available item, grouped by class in claim order and, within a class,
// oldest first message first. Queues in skip, and queues whose stored items
// are all known to be leased or delayed by this engine, are left out. The
// counts are this engine's (see queueState); claimOnce re-reads them when
// they aged and before answering empty.
func (s *Service) candidates(ctx context.Context, f claimFilter, skip map[pair]bool) ([][]pair, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	var all []pair
	for p := range s.consumers {
		if f.allows(p) && !skip[p] {
			all = append(all, p)
		}
	}
	var leased map[pair]int
	if len(all) > 0 && len(s.leases) > 0 {
		leased = make(map[pair]int)
		for _, l := range s.leases {
			if l.until.After(now) {
				leased[pair{l.class, l.typ}]++
			}
		}
	}
	s.mu.Unlock()
	if len(all) == 0 {
		return nil, nil
	}
	avail := s.available(all, leased)
	all = slices.DeleteFunc(all, func(p pair) bool { return avail[p] <= 0 })
	byClass := make([][]pair, len(priority.All))
	for _, p := range all {
		byClass[p.class.Order()] = append(byClass[p.class.Order()], p)
	}
	for i, ps := range byClass {
		if len(ps) < 2 {
			continue
		}
		// Within a class: the type whose oldest stored message is oldest.
		first := make(map[pair]uint64, len(ps))
		for _, p := range ps {
			h, err := s.head(ctx, p)
			if err != nil {
				return nil, err
			}
			first[p] = h
		}
		slices.SortFunc(ps, func(a, b pair) int {
			if c := compareU64(first[a], first[b]); c != 0 {
				return c
			}
			return strings.Compare(a.typ, b.typ)
		})
		byClass[i] = ps
	}
	return byClass, nil
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type takeResult int

const (
	takeSkipped takeResult = iota // stale copy, settled or exhausted item: look further
	takeQuota                     // put back: its tenant is at its quota
	takeGranted
)

// firstCandidate returns the queue a claim for f would fetch from first,
// by this engine's counts (the zero pair when none).
func (s *Service) firstCandidate(ctx context.Context, f claimFilter) pair {
	byClass, err := s.candidates(ctx, f, nil)
	if err != nil {
		return pair{}
	}
	for _, ps := range byClass {
		if len(ps) > 0 {
			return ps[0]
		}
	}
	return pair{}
}

// ackNext is an acknowledged delivery whose +ACK has not been sent: the
// claim that follows the ack sends it as "+NXT" when its first fetch is
// from the same queue (JetStream acks, then answers with that consumer's
// next message or a no-messages status, so the answer is also the ack's
// confirmation). sent reports that it went out.
type ackNext struct {
	p     pair
	reply string
	sent  bool
}

// countsMaxAge is how old this engine's queue counts may get before a
// claim re-reads them (cache.go, queueState).
const countsMaxAge = 250 * time.Millisecond

// claimRefresh reports whether this claim should re-read the aged queue
// counts; it is true for one claim at a time.
func (s *Service) claimRefresh() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.q.refreshing || time.Since(s.q.at) < countsMaxAge {
		return false
	}
	s.q.refreshing = true
	return true
}

// claimOnce claims one item for f. nxt, when non-nil, is an ack the first
// fetch from nxt.p carries.
func (s *Service) claimOnce(ctx context.Context, f claimFilter, nxt *ackNext) (claimReply, error) {
	quota := false
	tried := make(map[pair]bool)
	// Other engines' submits are in the stream, not in this engine's
	// counts: re-read them now and then, so a higher class queued elsewhere
	// is not passed over for a lower one known here. One claim re-reads;
	// the others meanwhile go on with the counts they have.
	refreshed := false
	if s.claimRefresh() {
		err := s.refreshCounts(ctx)
		s.qmu.Lock()
		s.q.refreshing = false
		s.qmu.Unlock()
		if err != nil {
			return claimReply{}, err
		}
		refreshed = true
	}
	for pass := range 2 {
		if pass == 1 {
			if refreshed {
				break // the counts pass 0 used were just read
			}
			// Nothing found from this engine's counts: re-read them, so an
			// item another engine queued is not missed, and look at the
			// queues not tried yet.
			if err := s.refreshCounts(ctx); err != nil {
				return claimReply{}, err
			}
		}
		byClass, err := s.candidates(ctx, f, tried)
		if err != nil {
			return claimReply{}, err
		}
		for _, ps := range byClass {
			for _, p := range ps {
				tried[p] = true
				rep, res, err := s.claimFrom(ctx, f, p, nxt)
				if err != nil {
					return claimReply{}, err
				}
				switch res {
				case takeGranted:
					return rep, nil
				case takeQuota:
					quota = true
				}
			}
		}
	}
	if quota {
		return claimReply{Claimed: false, Reason: "tenant_quota"}, nil
	}
	return claimReply{Claimed: false, Reason: "empty"}, nil
}

// claimFrom takes deliveries from p's consumer until one is granted, the
// queue has none available, or maxTakesPerQueue were inspected.
func (s *Service) claimFrom(ctx context.Context, f claimFilter, p pair, nxt *ackNext) (claimReply, takeResult, error) {
	res := takeSkipped
	for i := range maxTakesPerQueue {
		var msg *nats.Msg
		var err error
		if nxt != nil && !nxt.sent && nxt.p == p {
			msg, err = s.pull(ctx, p, nxt.reply, pullAckNext, fetchTimeout, nxt)
			if msg == nil && err == nil && i == 0 && s.expecting(p) {
				msg, err = s.pull(ctx, p, s.pullPrefix+p.consumerName(), pullExpect, expectWait+fetchTimeout, nil)
			}
		} else {
			msg, err = s.fetchOne(ctx, p, i == 0 && s.expecting(p))
		}
		if err != nil || msg == nil {
			return claimReply{}, res, err
		}
		rep, r, err := s.take(ctx, f, p, msg)
		if err != nil || r == takeGranted {
			return rep, r, err
		}
		if r == takeQuota {
			res = takeQuota
		}
	}
	return claimReply{}, res, nil
}

// expectWait is how long a fetch waits on a queue this engine has just
// published to when the no-wait fetch found nothing: the consumer may not
// have caught up yet.
const expectWait = 20 * time.Millisecond

// fetchTimeout bounds one pull request beyond its own expiry.
const fetchTimeout = 5 * time.Second

var (
	pullNoWait  = []byte(`{"batch":1,"no_wait":true}`)
	pullExpect  = []byte(fmt.Sprintf(`{"batch":1,"expires":%d}`, expectWait.Nanoseconds()))
	pullAckNext = []byte(`+NXT {"batch":1,"no_wait":true}`)
)

// fetchOne returns p's consumer's next available delivery, nil when none.
// It is one pull request (CONSUMER.MSG.NEXT, batch 1) on the connection's
// shared reply subscription. With expect it waits up to expectWait when
// the no-wait pull finds none.
func (s *Service) fetchOne(ctx context.Context, p pair, expect bool) (*nats.Msg, error) {
	next := s.pullPrefix + p.consumerName()
	msg, err := s.pull(ctx, p, next, pullNoWait, fetchTimeout, nil)
	if msg != nil || err != nil || !expect {
		return msg, err
	}
	return s.pull(ctx, p, next, pullExpect, expectWait+fetchTimeout, nil)
}

// puller is one consumer's pull channel: a long-lived reply subscription
// (JetStream delivers a pulled message under its own subject, so the
// connection's shared request mux cannot match it) and the lock that keeps
// one pull of that consumer outstanding at a time.
type puller struct {
	mu    sync.Mutex
	sub   *nats.Subscription
	inbox string
}

// pull sends body to subject (the consumer's next-message API, or a
// delivery's ack reply for "+NXT") with p's pull inbox as the reply and
// returns the delivery it answers with, nil for a status. For a "+NXT",
// nxt is its ack, marked sent once the ack went out.
func (s *Service) pull(ctx context.Context, p pair, subject string, body []byte, timeout time.Duration, nxt *ackNext) (*nats.Msg, error) {
	s.mu.Lock()
	pl := s.pullers[p]
	if pl == nil {
		pl = &puller{}
		s.pullers[p] = pl
	}
	s.mu.Unlock()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.sub == nil {
		pl.inbox = s.nc.NewInbox()
		sub, err := s.nc.SubscribeSync(pl.inbox)
		if err != nil {
			return nil, fmt.Errorf("work: fetch %s: %w", p.consumerName(), err)
		}
		pl.sub = sub
	}
	// A delivery left over from a pull whose answer was a stray status is
	// taken first; stray statuses are dropped. A "+NXT" then goes out as a
	// confirmed +ACK: its answer would be the next leftover, and the caller
	// counts on the ack being confirmed when this returns.
	for {
		m, err := pl.sub.NextMsg(0)
		if err != nil {
			break
		}
		if !isStatus(m) {
			if nxt != nil {
				if err := s.settleReply(ctx, subject, "+ACK"); err != nil {
					s.cfg.Logger.Warn("work: ack delivery", "err", err)
				}
				nxt.sent = true
			}
			return m, nil
		}
	}
	if err := s.nc.PublishRequest(subject, pl.inbox, body); err != nil {
		return nil, fmt.Errorf("work: fetch %s: %w", p.consumerName(), err)
	}
	if nxt != nil {
		nxt.sent = true
		s.ackNexts.Add(1)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := pl.sub.NextMsgWithContext(ctx)
	if err != nil {
		// The answer may still come: drop the subscription so a late
		// delivery finds no interest and JetStream redelivers it after
		// AckWait, as for an abandoned fetch.
		_ = pl.sub.Unsubscribe()
		pl.sub = nil
		return nil, fmt.Errorf("work: fetch %s: %w", p.consumerName(), err)
	}
	if isStatus(m) {
		// 404 no messages, 408 request expired, 409 and such: nothing now.
		return nil, nil
	}
	return m, nil
}

// isStatus reports a JetStream pull status message (no payload, a Status header).
func isStatus(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") != ""
}

// closePullers drops every pull subscription.
func (s *Service) closePullers() {
	s.mu.Lock()
	pls := make([]*puller, 0, len(s.pullers))
	for _, pl := range s.pullers {
		pls = append(pls, pl)
	}
	s.mu.Unlock()
	for _, pl := range pls {
		pl.mu.Lock()
		if pl.sub != nil {
			_ = pl.sub.Unsubscribe()
			pl.sub = nil
		}
		pl.mu.Unlock()
	}
}

// take turns one delivery into a grant, or disposes of it.
func (s *Service) take(ctx context.Context, f claimFilter, p pair, msg *nats.Msg) (claimReply, takeResult, error) {
	md, err := msg.Metadata()
	if err != nil {
		return claimReply{}, takeSkipped, fmt.Errorf("work: delivery metadata: %w", err)
	}
	it, ok := itemFromMsg(msg.Header, msg.Data)
	if !ok {
		s.cfg.Logger.Warn("work: dropping malformed message", "seq", md.Sequence.Stream)
		s.removed(p, md.Sequence.Stream)
		return claimReply{}, takeSkipped, s.settleReply(ctx, msg.Reply, "+TERM malformed")
	}
	seq, delivered, reply := md.Sequence.Stream, md.NumDelivered, msg.Reply
	unlock := s.lock(it.ID)
	defer unlock()
	fresh := false
	for range 4 {
		rec, rev, found, err := s.getRecord(ctx, it.ID, fresh)
		if err != nil {
			return claimReply{}, takeSkipped, err
		}
		if !found {
			rec = record{ID: it.ID, Seq: seq, Class: it.Class, Type: it.Type, Tenant: it.Tenant, MaxAttempts: it.MaxAttempts, State: stateQueued}
			var exists bool
			if rev, exists, err = s.createRecord(ctx, rec); err != nil {
				return claimReply{}, takeSkipped, err
			}
			if exists {
				fresh = true
				continue
			}
		}
		storedSeq := rec.Seq
		if rec.Seq == 0 {
			rec.Seq = seq // the submit that published it has not recorded it yet
		}
		if rec.Seq != seq || rec.State == stateAcked || rec.State == stateDead {
			if !fresh {
				// Settle a copy only on the record as stored, not as cached.
				fresh = true
				continue
			}
			s.removed(p, seq)
			switch {
			case rec.Seq != seq:
				return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+TERM superseded")
			case rec.State == stateAcked:
				return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+ACK")
			default:
				return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+TERM dead")
			}
		}
		attempt := attemptOf(delivered, rec.Defers)
		if attempt > rec.MaxAttempts {
			err := s.deadLetter(ctx, rec, rev, it, rec.MaxAttempts, "lease_exhausted", reply)
			if errors.Is(err, errRevision) {
				fresh = true
				continue
			}
			return claimReply{}, takeSkipped, err
		}
		if s.tenantLeases(rec.Tenant) >= s.cfg.TenantQuota {
			rec.Defers++
			rec.State, rec.Delivered, rec.Reply, rec.LeaseUntil = stateQueued, delivered, "", time.Time{}
			if _, err := s.updateRecord(ctx, rec, rev); err != nil {
				if errors.Is(err, errRevision) {
					fresh = true
					continue
				}
				return claimReply{}, takeSkipped, err
			}
			s.putBack(p, s.cfg.QuotaDelay)
			return claimReply{}, takeQuota, s.settleReply(ctx, reply, nakBody(s.cfg.QuotaDelay))
		}
		now := s.cfg.Now()
		// A first delivery of a full lease is granted without a write: see
		// "Unrecorded grants" below.
		unrecorded := delivered == 1 && f.lease == s.cfg.Lease && rec.State == stateQueued &&
			rec.Delivered == 0 && storedSeq == seq && found && s.settled(now)
		rec.State, rec.Delivered, rec.Reply, rec.LeaseUntil = stateLeased, delivered, reply, now.Add(f.lease).Truncate(time.Millisecond)
		rec.Nonce = rand.Uint64()
		if !unrecorded {
			if _, err := s.updateRecord(ctx, rec, rev); err != nil {
				if errors.Is(err, errRevision) {
					fresh = true
					continue
				}
				return claimReply{}, takeSkipped, err
			}
		}
		cls, _ := priority.Parse(rec.Class)
		s.track(rec, cls, unrecorded)
		return claimReply{
			Claimed:        true,
			ID:             rec.ID,
			Type:           rec.Type,
			Class:          rec.Class,
			Tenant:         rec.Tenant,
			Payload:        it.Payload,
			Attempt:        attempt,
			MaxAttempts:    rec.MaxAttempts,
			LeaseExpiresAt: formatTime(rec.LeaseUntil),
			Token: encodeToken(s.key, grant{ID: rec.ID, Seq: rec.Seq, Delivered: rec.Delivered, Nonce: rec.Nonce,
				LeaseUntil: rec.LeaseUntil.UnixMilli(), Reply: rec.Reply}),
		}, takeGranted, nil
	}
	return claimReply{}, takeSkipped, errRevision
}

// attemptOf is NumDelivered − defers, at least 1.
func attemptOf(delivered, defers uint64) int {
	if delivered <= defers {
		return 1
	}
	a := delivered - defers
	if a > MaxMaxAttempts+1 {
		return MaxMaxAttempts + 1
	}
	return int(a)
}

// Unrecorded grants
//
// Granting a delivery normally writes the item's record (state leased, the
// delivery count and its ack reply subject) before the claim is answered:
// that write fences every older token and lets a restarted engine find the
// lease. A first delivery (NumDelivered 1) of a full lease (the consumers'
// AckWait) skips the write, because nothing it would protect against can
// happen before it:
//   - no older delivery of that message exists, so there is no older token
//     to fence;
//   - every later delivery (the lease ran out, or the delivery was put back)
//     is granted with a write, which the old token then fails against;
//   - the token carries the lease expiry and the reply subject under the
//     engine's HMAC, so any engine (this one after a restart, or another)
//     settles the delivery from the token while the record still reads
//     "queued, never delivered" for the token's stream sequence (current in
//     settle.go), and the settle's own compare-and-set on that record
//     decides any race with a later delivery's grant;
//   - JetStream's AckWait is the lease, so no engine timer has to end it.
//
// The lease is recorded after RecordAfter (default 1 s) if it is still
// held, so a task that runs longer is in the bucket as before and a
// restarted engine counts it against its tenant's quota. What an engine
// crash loses is the leases younger than that: until they are settled or
// expire, the restarted engine does not count them in its tenant quotas or
// in_flight.
//
// Every grant has a random nonce, in its token and, once recorded, in the
// record; a settle's token must carry the record's. For one Lease after
// Open, and after the connection reaches a different server (a restarted
// server has a new id; a reconnect may land on another node), every grant
// is recorded and the record cache is dropped: a crash of the server can lose a consumer's newest delivered
// state, and JetStream then delivers those messages again as first
// deliveries. The grant written for such a delivery has a new nonce, which
// every older token fails against, and after one Lease no token from
// before the restart is live any more.

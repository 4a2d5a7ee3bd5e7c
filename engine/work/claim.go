package work

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
		rep, err := s.claimOnce(ctx, f)
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

// candidates returns the queues the filter allows, grouped by class in
// claim order, with queues known to be empty left out.
func (s *Service) candidates(ctx context.Context, f claimFilter) ([][]pair, map[pair]bool, error) {
	s.mu.Lock()
	var all []pair
	for p := range s.consumers {
		if f.allows(p) {
			all = append(all, p)
		}
	}
	s.mu.Unlock()
	if len(all) == 0 {
		return nil, nil, nil
	}
	// One request for every queue's stored count instead of one empty
	// fetch per queue. A queue whose stored items are not all leased is
	// expected to have one available (a consumer learns of a new message
	// asynchronously, so a no-wait fetch right after a publish can miss it).
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(SubjectPrefix+">"))
	if err != nil {
		return nil, nil, err
	}
	leased := make(map[pair]int)
	now := s.cfg.Now()
	s.mu.Lock()
	for _, l := range s.leases {
		if l.until.After(now) {
			leased[pair{l.class, l.typ}]++
		}
	}
	s.mu.Unlock()
	all = slices.DeleteFunc(all, func(p pair) bool { return info.State.Subjects[p.subject()] == 0 })
	expect := make(map[pair]bool, len(all))
	for _, p := range all {
		expect[p] = int(info.State.Subjects[p.subject()]) > leased[p]
	}
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
			m, err := s.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(p.subject()))
			switch {
			case err == nil:
				first[p] = m.Sequence
			case errors.Is(err, jetstream.ErrMsgNotFound):
				first[p] = ^uint64(0)
			default:
				return nil, nil, err
			}
		}
		slices.SortFunc(ps, func(a, b pair) int {
			if c := compareU64(first[a], first[b]); c != 0 {
				return c
			}
			return strings.Compare(a.typ, b.typ)
		})
		byClass[i] = ps
	}
	return byClass, expect, nil
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

func (s *Service) claimOnce(ctx context.Context, f claimFilter) (claimReply, error) {
	byClass, expect, err := s.candidates(ctx, f)
	if err != nil {
		return claimReply{}, err
	}
	quota := false
	for _, ps := range byClass {
		for _, p := range ps {
			s.mu.Lock()
			cons := s.consumers[p]
			s.mu.Unlock()
			for i := range maxTakesPerQueue {
				msg, err := fetchOne(cons, i == 0 && expect[p])
				if err != nil {
					return claimReply{}, err
				}
				if msg == nil {
					break
				}
				rep, res, err := s.take(ctx, f, msg)
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

// expectWait is how long a fetch waits on a queue whose stored count says
// an item should be available but whose consumer has not caught up yet.
const expectWait = 20 * time.Millisecond

// fetchOne returns the consumer's next available delivery, nil when none.
// With expect it waits up to expectWait when the no-wait fetch finds none.
func fetchOne(c jetstream.Consumer, expect bool) (jetstream.Msg, error) {
	batch, err := c.FetchNoWait(1)
	if err != nil {
		return nil, err
	}
	msg, err := drain(batch)
	if msg != nil || err != nil || !expect {
		return msg, err
	}
	if batch, err = c.Fetch(1, jetstream.FetchMaxWait(expectWait)); err != nil {
		return nil, err
	}
	return drain(batch)
}

func drain(batch jetstream.MessageBatch) (jetstream.Msg, error) {
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if err := batch.Error(); err != nil && msg == nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		return nil, err
	}
	return msg, nil
}

// take turns one delivery into a grant, or disposes of it.
func (s *Service) take(ctx context.Context, f claimFilter, msg jetstream.Msg) (claimReply, takeResult, error) {
	md, err := msg.Metadata()
	if err != nil {
		return claimReply{}, takeSkipped, err
	}
	it, ok := itemFromMsg(msg.Headers(), msg.Data())
	if !ok {
		s.cfg.Logger.Warn("work: dropping malformed message", "seq", md.Sequence.Stream)
		return claimReply{}, takeSkipped, s.settleReply(ctx, msg.Reply(), "+TERM malformed")
	}
	seq, delivered, reply := md.Sequence.Stream, md.NumDelivered, msg.Reply()
	unlock := s.lock(it.ID)
	defer unlock()
	for range 3 {
		rec, rev, found, err := s.loadRecord(ctx, it.ID)
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
				continue
			}
		}
		if rec.Seq == 0 {
			rec.Seq = seq // the submit that published it has not recorded it yet
		}
		if rec.Seq != seq {
			return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+TERM superseded")
		}
		switch rec.State {
		case stateAcked:
			return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+ACK")
		case stateDead:
			return claimReply{}, takeSkipped, s.settleReply(ctx, reply, "+TERM dead")
		}
		attempt := attemptOf(delivered, rec.Defers)
		if attempt > rec.MaxAttempts {
			err := s.deadLetter(ctx, rec, rev, it, rec.MaxAttempts, "lease_exhausted", reply)
			if errors.Is(err, errRevision) {
				continue
			}
			return claimReply{}, takeSkipped, err
		}
		if s.tenantLeases(rec.Tenant) >= s.cfg.TenantQuota {
			rec.Defers++
			rec.State, rec.Delivered, rec.Reply, rec.LeaseUntil = stateQueued, delivered, "", time.Time{}
			if _, err := s.updateRecord(ctx, rec, rev); err != nil {
				if errors.Is(err, errRevision) {
					continue
				}
				return claimReply{}, takeSkipped, err
			}
			return claimReply{}, takeQuota, s.settleReply(ctx, reply, nakBody(s.cfg.QuotaDelay))
		}
		now := s.cfg.Now()
		rec.State, rec.Delivered, rec.Reply, rec.LeaseUntil = stateLeased, delivered, reply, now.Add(f.lease)
		if _, err := s.updateRecord(ctx, rec, rev); err != nil {
			if errors.Is(err, errRevision) {
				continue
			}
			return claimReply{}, takeSkipped, err
		}
		cls, _ := priority.Parse(rec.Class)
		s.track(rec, cls)
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
			Token:          encodeToken(s.key, grant{ID: rec.ID, Seq: rec.Seq, Delivered: rec.Delivered}),
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

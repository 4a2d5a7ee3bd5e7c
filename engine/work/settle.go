package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// current verifies token and loads the record of its grant, which must be
// the item's current, live lease. It returns the record with the item's
// lock held; the caller must call unlock. The record may come from the
// cache unless fresh: the caller's compare-and-set catches a stale one.
func (s *Service) current(ctx context.Context, token string, fresh bool) (rec record, rev uint64, unlock func(), err error) {
	g, err := verifyToken(s.key, token)
	if err != nil {
		return record{}, 0, nil, protocol.BadRequest("invalid token")
	}
	unlock = s.lock(g.ID)
	rec, rev, found, err := s.getRecord(ctx, g.ID, fresh)
	if err != nil {
		unlock()
		return record{}, 0, nil, err
	}
	if found && g.Delivered == 1 && rec.State == stateQueued && rec.Delivered == 0 && rec.Seq == g.Seq && g.Reply != "" {
		// An unrecorded grant (claim.go): the record has not seen any
		// delivery of this copy, so the token's first delivery is the
		// current one, as the token says. The caller's compare-and-set on
		// rev loses to any write since.
		rec.State, rec.Delivered, rec.Reply, rec.Nonce = stateLeased, g.Delivered, g.Reply, g.Nonce
		rec.LeaseUntil = time.UnixMilli(g.LeaseUntil)
	}
	// The nonce names one grant exactly: a redelivery that repeats a
	// delivery count (JetStream lost its consumer state in a crash) still
	// fences the older token.
	if !found || rec.State != stateLeased || rec.Seq != g.Seq || rec.Delivered != g.Delivered || rec.Nonce != g.Nonce ||
		!rec.LeaseUntil.After(s.cfg.Now()) {
		unlock()
		return record{}, 0, nil, protocol.Fenced()
	}
	return rec, rev, unlock, nil
}

// withGrant runs settle on token's current grant with the item's lock
// held. The grant is read from the cache unless fresh; when the cached
// record fences the token, or settle's compare-and-set loses to it
// (errRevision: another engine changed the record since), the decision is
// made once more on the stored record, and FENCED or losing again is
// final. Whatever settle does before its compare-and-set must be safe to
// do twice.
func (s *Service) withGrant(ctx context.Context, token string, fresh bool, settle func(rec record, rev uint64) error) error {
	for try := 0; ; try++ {
		rec, rev, unlock, err := s.current(ctx, token, fresh || try > 0)
		if err != nil {
			var pe *protocol.Error
			if !fresh && try == 0 && errors.As(err, &pe) && pe.Code == protocol.CodeConflict {
				// FENCED on the cached record: another engine may have
				// renewed or re-recorded the grant; decide on the stored one.
				continue
			}
			return err
		}
		err = settle(rec, rev)
		unlock()
		if errors.Is(err, errRevision) && !fresh && try == 0 {
			continue
		}
		return fencedOnRace(err)
	}
}

// fencedOnRace maps a lost compare-and-set to FENCED: someone else changed
// the item's grant between our read and our write.
func fencedOnRace(err error) error {
	if errors.Is(err, errRevision) {
		return protocol.Fenced()
	}
	return err
}

func (s *Service) ack(ctx context.Context, req protocol.Request) (any, error) {
	var in ackRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	var next claimFilter
	if in.Next != nil {
		// The whole request is checked before the ack changes anything.
		if in.Next.WaitMS != 0 {
			return nil, protocol.BadRequest("next.wait_ms is not allowed: an ack with next does not long-poll")
		}
		f, err := s.parseClaim(*in.Next)
		if err != nil {
			e := protocol.As(err)
			return nil, &protocol.Error{Code: e.Code, Text: "next: " + e.Text}
		}
		next = f
	}
	rec, reply, err := s.ackRecord(ctx, in.Token)
	if err != nil {
		return nil, err
	}
	if in.Next == nil {
		s.confirmAck(ctx, rec, reply)
		return ackReply{}, nil
	}
	// When the next claim would fetch from the acked item's queue first,
	// that fetch carries the +ACK as "+NXT"; otherwise the confirmed +ACK
	// goes first, alone. Not on a replicated stream: there JetStream
	// answers +NXT before the ack's removal is replicated.
	var nxt *ackNext
	if p, ok := pairOfRecord(rec); ok && reply != "" && s.cfg.Replicas <= 1 && s.firstCandidate(ctx, next) == p {
		nxt = &ackNext{p: p, reply: reply}
	} else {
		s.confirmAck(ctx, rec, reply)
	}
	rep, err := s.claimOnce(ctx, next, nxt)
	if nxt != nil && !nxt.sent {
		s.confirmAck(ctx, rec, reply)
	}
	if err != nil {
		e := protocol.As(err)
		return ackReply{NextError: &wireError{Code: e.Code, Text: e.Text}}, nil
	}
	return ackReply{Next: &rep}, nil
}

// ackRecord settles token's delivery as done in the item's record and
// returns the record and the delivery's ack reply subject, for the +ACK
// the caller sends. The record goes first, durably: it is the outcome.
// Should the +ACK be lost, the redelivery finds the item acked (its record
// outlives any redelivery, see DedupWindow) and acknowledges it without
// handing it out. The item's lock is released when it returns.
func (s *Service) ackRecord(ctx context.Context, token string) (record, string, error) {
	var acked record
	var reply string
	err := s.withGrant(ctx, token, false, func(rec record, rev uint64) error {
		reply = rec.Reply
		rec.State, rec.Reply, rec.LeaseUntil = stateAcked, "", time.Time{}
		if _, err := s.updateRecord(ctx, rec, rev); err != nil {
			return err
		}
		acked = rec
		return nil
	})
	if err != nil {
		return record{}, "", err
	}
	s.untrack(acked.ID)
	if p, ok := pairOfRecord(acked); ok {
		s.removed(p, acked.Seq)
	}
	return acked, reply, nil
}

// confirmAck sends the +ACK and waits for JetStream's confirmation, so
// that a stats or claim after the ack's reply no longer sees the item
// stored. On a replicated stream the confirmation comes before the
// stream's removal of the message is applied, so it also waits (bounded)
// until the message is gone. A failure is logged: the record is the
// outcome.
func (s *Service) confirmAck(ctx context.Context, rec record, reply string) {
	if err := s.settleReply(ctx, reply, "+ACK"); err != nil {
		s.cfg.Logger.Warn("work: ack delivery", "id", rec.ID, "err", err)
		return
	}
	if s.cfg.Replicas > 1 {
		s.awaitRemoved(ctx, rec.Seq)
	}
}

// awaitRemoval bounds awaitRemoved.
const awaitRemoval = 250 * time.Millisecond

// awaitRemoved polls the work stream until message seq is gone, backing
// off from 1 ms, for at most awaitRemoval: there is no event for "the
// replicated removal was applied".
func (s *Service) awaitRemoved(ctx context.Context, seq uint64) {
	deadline := time.Now().Add(awaitRemoval)
	for d := time.Millisecond; ; d = min(2*d, 32*time.Millisecond) {
		if _, err := s.stream.GetMsg(ctx, seq); isNotFound(err) || ctx.Err() != nil {
			return
		}
		if time.Now().Add(d).After(deadline) {
			s.cfg.Logger.Debug("work: acked message still stored", "seq", seq)
			return
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// retryDelay is RetryBase·2^(attempt−1) capped at RetryMax, times a
// proportional jitter in [0.5, 1.0).
func (s *Service) retryDelay(attempt int) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     s.cfg.RetryBase,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         s.cfg.RetryMax,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	d := b.InitialInterval
	for range max(attempt, 1) {
		d = b.NextBackOff()
	}
	return time.Duration(float64(d) * (0.5 + 0.5*s.cfg.Rand()))
}

func (s *Service) retry(ctx context.Context, req protocol.Request) (any, error) {
	var in retryRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	if len(in.Error) > 4*MaxReasonLen {
		return nil, protocol.TooLarge("error text over %d bytes", 4*MaxReasonLen)
	}
	var out retryReply
	err := s.withGrant(ctx, in.Token, false, func(rec record, rev uint64) error {
		attempt := attemptOf(rec.Delivered, rec.Defers)
		if attempt >= rec.MaxAttempts {
			it, err := s.itemOf(ctx, rec)
			if err != nil {
				return goneAsRace(err)
			}
			if err := s.deadLetter(ctx, rec, rev, it, attempt, "attempts_exhausted", rec.Reply); err != nil {
				return err
			}
			out = retryReply{Dead: true}
			return nil
		}
		delay := s.retryDelay(attempt)
		next := s.cfg.Now().Add(delay)
		reply := rec.Reply
		rec.State, rec.Reply, rec.LeaseUntil = stateQueued, "", time.Time{}
		if _, err := s.updateRecord(ctx, rec, rev); err != nil {
			return err
		}
		s.untrack(rec.ID)
		if p, ok := pairOfRecord(rec); ok {
			s.putBack(p, delay)
		}
		out = retryReply{Dead: false, NextAt: formatTime(next)}
		return s.settleReply(ctx, reply, nakBody(delay))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) deferItem(ctx context.Context, req protocol.Request) (any, error) {
	var in deferRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	if len(in.Reason) > MaxReasonLen {
		return nil, protocol.TooLarge("reason over %d bytes", MaxReasonLen)
	}
	now := s.cfg.Now()
	var next time.Time
	switch {
	case (in.Until == "") == (in.DelayMS == nil):
		return nil, protocol.BadRequest("exactly one of until and delay_ms is required")
	case in.DelayMS != nil:
		if *in.DelayMS < 0 || *in.DelayMS > int64(365*24*time.Hour/time.Millisecond) {
			return nil, protocol.BadRequest("invalid delay_ms %d", *in.DelayMS)
		}
		next = now.Add(time.Duration(*in.DelayMS) * time.Millisecond)
	default:
		t, err := time.Parse(time.RFC3339, in.Until)
		if err != nil {
			return nil, protocol.BadRequest("invalid until %q: want RFC 3339", in.Until)
		}
		if t.Sub(now) > 365*24*time.Hour {
			return nil, protocol.BadRequest("until %q is more than a year ahead", in.Until)
		}
		next = t
	}
	if next.Before(now) {
		next = now
	}
	err := s.withGrant(ctx, in.Token, false, func(rec record, rev uint64) error {
		reply := rec.Reply
		// The defer count first, durably: the Nak's redelivery then
		// consumes no attempt.
		rec.Defers++
		rec.State, rec.Reply, rec.LeaseUntil = stateQueued, "", time.Time{}
		if _, err := s.updateRecord(ctx, rec, rev); err != nil {
			return err
		}
		s.untrack(rec.ID)
		if p, ok := pairOfRecord(rec); ok {
			s.putBack(p, next.Sub(now))
		}
		return s.settleReply(ctx, reply, nakBody(next.Sub(now)))
	})
	if err != nil {
		return nil, err
	}
	return deferReply{NextAt: formatTime(next)}, nil
}

func (s *Service) extend(ctx context.Context, req protocol.Request) (any, error) {
	var in extendRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	d, err := s.leaseFor(in.LeaseSeconds)
	if err != nil {
		return nil, err
	}
	var out extendReply
	// Fresh: the +WPI below goes out before the compare-and-set.
	err = s.withGrant(ctx, in.Token, true, func(rec record, rev uint64) error {
		// +WPI restarts JetStream's full AckWait.
		if err := s.settleReply(ctx, rec.Reply, "+WPI"); err != nil {
			return err
		}
		rec.LeaseUntil = s.cfg.Now().Add(d)
		if _, err := s.updateRecord(ctx, rec, rev); err != nil {
			return err
		}
		cls, _ := priority.Parse(rec.Class)
		s.track(rec, cls, false)
		out = extendReply{LeaseExpiresAt: formatTime(rec.LeaseUntil)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) deadLetterOp(ctx context.Context, req protocol.Request) (any, error) {
	var in deadRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	if in.Reason == "" {
		return nil, protocol.BadRequest("reason is required")
	}
	if len(in.Reason) > MaxReasonLen {
		return nil, protocol.TooLarge("reason over %d bytes", MaxReasonLen)
	}
	err := s.withGrant(ctx, in.Token, false, func(rec record, rev uint64) error {
		it, err := s.itemOf(ctx, rec)
		if err != nil {
			return goneAsRace(err)
		}
		// A run that loses to a stale record takes its dead letter back
		// (deadLetter), so a second run leaves one.
		return s.deadLetter(ctx, rec, rev, it, attemptOf(rec.Delivered, rec.Defers), in.Reason, rec.Reply)
	})
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// goneAsRace maps a work-stream copy that is gone to errRevision: the
// item was settled since the record was read, so the decision is made
// again on the stored record (withGrant).
func goneAsRace(err error) error {
	if isNotFound(err) {
		return errRevision
	}
	return err
}

// itemOf reads the item's current copy from the work stream.
func (s *Service) itemOf(ctx context.Context, rec record) (storedItem, error) {
	m, err := s.stream.GetMsg(ctx, rec.Seq)
	if err != nil {
		return storedItem{}, fmt.Errorf("work: load item %s: %w", rec.ID, err)
	}
	it, ok := itemFromMsg(m.Header, m.Data)
	if !ok || it.ID != rec.ID {
		return storedItem{}, fmt.Errorf("work: item %s: malformed message %d", rec.ID, rec.Seq)
	}
	return it, nil
}

// deadLetter moves an item to EDICT_WORK_DEAD: the dead letter first
// (deduplicated by <id>:<seq>:<record revision>), then the record, then
// the delivery's Term.
func (s *Service) deadLetter(ctx context.Context, rec record, rev uint64, it storedItem, attempts int, reason, reply string) error {
	cls, err := priority.Parse(rec.Class)
	if err != nil {
		return fmt.Errorf("work: record %s: %w", rec.ID, err)
	}
	b, err := encodeDead(storedDead{ID: rec.ID, Type: rec.Type, Class: rec.Class, Tenant: rec.Tenant, Payload: it.Payload, Attempts: attempts, Reason: reason, MaxAttempts: rec.MaxAttempts})
	if err != nil {
		return err
	}
	msg := nats.NewMsg(pair{cls, rec.Type}.deadSubject())
	msg.Data = b
	// Deduplicated per record revision: the same attempt after a crash
	// finds its dead letter again; one that lost to a newer record makes
	// its own.
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(fmt.Sprintf("%s:%d:%d", rec.ID, rec.Seq, rev)), jetstream.WithExpectStream(DeadStreamName))
	if err != nil {
		return fmt.Errorf("work: dead-letter %s: %w", rec.ID, err)
	}
	rec.State, rec.Reply, rec.LeaseUntil = stateDead, "", time.Time{}
	rec.DeadSeq, rec.Attempts = ack.Sequence, attempts
	if _, err := s.updateRecord(ctx, rec, rev); err != nil {
		// Not dead after all (the record changed): take the dead letter
		// back, so dead_list does not show a live item.
		dctx, cancel := context.WithTimeout(s.base, 10*time.Second)
		if derr := s.dead.DeleteMsg(dctx, ack.Sequence); derr != nil && !errors.Is(derr, jetstream.ErrMsgNotFound) {
			s.cfg.Logger.Warn("work: remove the dead letter of an item that is not dead", "id", rec.ID, "err", derr)
		}
		cancel()
		return err
	}
	s.untrack(rec.ID)
	s.removed(pair{cls, rec.Type}, rec.Seq)
	if err := s.settleReply(ctx, reply, "+TERM "+reason); err != nil {
		s.cfg.Logger.Warn("work: term dead-lettered delivery", "id", rec.ID, "err", err)
	}
	s.cfg.Logger.Info("work: dead-lettered", "id", rec.ID, "reason", reason, "attempts", attempts)
	return nil
}

// pairOfRecord returns the queue of rec.
func pairOfRecord(rec record) (pair, bool) {
	c, err := priority.Parse(rec.Class)
	if err != nil {
		return pair{}, false
	}
	return pair{c, rec.Type}, true
}

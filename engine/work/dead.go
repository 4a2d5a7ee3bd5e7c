package work

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

func encodeDead(d storedDead) ([]byte, error) { return json.Marshal(d) }

func (s *Service) deadList(ctx context.Context, req protocol.Request) (any, error) {
	var in deadListRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	filter := DeadSubjectPrefix + ">"
	if in.Class != "" {
		c, err := priority.Parse(in.Class)
		if err != nil {
			return nil, protocol.BadRequest("unknown class %q", in.Class)
		}
		filter = DeadSubjectPrefix + c.String() + ".*"
	}
	var after uint64
	if in.After != "" {
		n, err := strconv.ParseUint(in.After, 10, 64)
		if err != nil {
			return nil, protocol.BadRequest("invalid after %q", in.After)
		}
		after = n
	}
	switch {
	case in.Limit == 0:
		in.Limit = DefaultDeadLimit
	case in.Limit < 0 || in.Limit > MaxDeadLimit:
		return nil, protocol.BadRequest("invalid limit %d: 1..%d", in.Limit, MaxDeadLimit)
	}
	out := deadListReply{Items: []deadItem{}}
	seq := after + 1
	for len(out.Items) < in.Limit {
		m, err := s.dead.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		seq = m.Sequence + 1
		var d storedDead
		if err := json.Unmarshal(m.Data, &d); err != nil {
			continue
		}
		out.Items = append(out.Items, deadItem{ID: d.ID, Type: d.Type, Class: d.Class, Tenant: d.Tenant, Payload: d.Payload, Attempts: d.Attempts, Reason: d.Reason})
	}
	// A full page: the next one starts after its last item.
	out.Next = strconv.FormatUint(seq-1, 10)
	return out, nil
}

func (s *Service) deadReplay(ctx context.Context, req protocol.Request) (any, error) {
	var in deadReplayRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	if len(in.IDs) == 0 || len(in.IDs) > MaxReplayIDs {
		return nil, protocol.BadRequest("ids: 1..%d item ids", MaxReplayIDs)
	}
	for _, id := range in.IDs {
		if !validID(id) {
			return nil, protocol.BadRequest("invalid id %q", id)
		}
	}
	n := 0
	for _, id := range in.IDs {
		ok, err := s.replayOne(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			n++
		}
	}
	return deadReplayReply{Replayed: n}, nil
}

// replayOne queues a dead item again with fresh attempts; false when id is
// not a dead letter.
func (s *Service) replayOne(ctx context.Context, id string) (bool, error) {
	unlock := s.lock(id)
	defer unlock()
	rec, rev, found, err := s.getRecord(ctx, id, true)
	if err != nil || !found || rec.State != stateDead {
		return false, err
	}
	m, err := s.dead.GetMsg(ctx, rec.DeadSeq)
	if err != nil {
		return false, err
	}
	var d storedDead
	if err := json.Unmarshal(m.Data, &d); err != nil {
		return false, err
	}
	cls, err := priority.Parse(rec.Class)
	if err != nil {
		return false, err
	}
	p := pair{cls, rec.Type}
	if _, err := s.ensureConsumer(ctx, p); err != nil {
		return false, err
	}
	dead := rec
	deadSeq := rec.DeadSeq
	rec.Replays++
	rec.State, rec.Seq, rec.Defers, rec.Delivered, rec.Reply = stateQueued, 0, 0, 0, ""
	rec.LeaseUntil, rec.DeadSeq, rec.Attempts = time.Time{}, 0, 0
	if rev, err = s.updateRecord(ctx, rec, rev); err != nil {
		return false, err
	}
	ack, err := s.publishItem(ctx, p, storedItem{ID: rec.ID, Type: rec.Type, Class: rec.Class, Tenant: rec.Tenant, Payload: d.Payload, MaxAttempts: rec.MaxAttempts}, msgID(rec))
	if err != nil {
		// Not queued: make it a dead letter again, so a later replay can
		// queue it (the dead letter itself is still stored). It keeps the
		// new replay count: should the publish have been stored after all,
		// the next replay's message id differs from that copy's, and the
		// copy is terminated as superseded when it is delivered.
		dead.Replays = rec.Replays
		rctx, cancel := context.WithTimeout(s.base, 10*time.Second)
		_, rerr := s.updateRecord(rctx, dead, rev)
		cancel()
		if rerr != nil {
			s.cfg.Logger.Error("work: replay failed and the record could not be restored", "id", id, "err", rerr)
		}
		return false, err
	}
	rec.Seq = ack.Sequence
	if !ack.Duplicate {
		s.published(p, ack.Sequence)
	}
	if _, err := s.updateRecord(ctx, rec, rev); err != nil && !errors.Is(err, errRevision) {
		return false, err
	}
	if err := s.dead.DeleteMsg(ctx, deadSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		s.cfg.Logger.Warn("work: remove replayed dead letter", "id", id, "err", err)
	}
	return true, nil
}

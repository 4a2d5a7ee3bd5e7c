package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Item states kept in a record.
const (
	stateQueued = "queued"
	stateLeased = "leased"
	stateAcked  = "acked"
	stateDead   = "dead"
)

// record is an item's durable state in EDICT_WORK_STATE.
type record struct {
	ID          string `json:"id"`
	Seq         uint64 `json:"seq,omitempty"`
	Class       string `json:"class"`
	Type        string `json:"type"`
	Tenant      string `json:"tenant,omitempty"`
	MaxAttempts int    `json:"max_attempts"`
	Defers      uint64 `json:"defers,omitempty"`
	Delivered   uint64 `json:"delivered,omitempty"`
	Reply       string `json:"reply,omitempty"`
	State       string `json:"state"`
	// Nonce names the current grant (random per grant; see grant).
	Nonce uint64 `json:"nonce,omitempty"`
	// LeaseUntil is the current lease's expiry (state leased).
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Replays counts dead_replay requeues; it names the replayed copy's
	// Nats-Msg-Id.
	Replays int `json:"replays,omitempty"`
	// DeadSeq is the sequence of the item's dead letter (state dead).
	DeadSeq uint64 `json:"dead_seq,omitempty"`
	// Attempts is the number of attempts used when it became a dead letter.
	Attempts int `json:"attempts,omitempty"`
}

const (
	itemKeyPrefix = "item."
	keyHMAC       = "hmac-key"
)

func itemKey(id string) string { return itemKeyPrefix + id }

var errRevision = errors.New("work: record changed concurrently")

// loadRecord reads an item's record and its revision; found is false when
// the item has none.
func (s *Service) loadRecord(ctx context.Context, id string) (rec record, rev uint64, found bool, err error) {
	e, err := s.kv.Get(ctx, itemKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, 0, false, nil
	}
	if err != nil {
		return record{}, 0, false, fmt.Errorf("work: load record %s: %w", id, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return record{}, 0, false, fmt.Errorf("work: decode record %s: %w", id, err)
	}
	return rec, e.Revision(), true, nil
}

// createRecord stores a new record; exists is true when the item already has one.
func (s *Service) createRecord(ctx context.Context, rec record) (rev uint64, exists bool, err error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, false, err
	}
	rev, err = s.kv.Create(ctx, itemKey(rec.ID), b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		s.cacheDrop(rec.ID)
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("work: create record %s: %w", rec.ID, err)
	}
	s.cachePut(rec, rev)
	return rev, false, nil
}

// updateRecord writes rec if the record is still at revision rev; it
// returns errRevision when it is not.
func (s *Service) updateRecord(ctx context.Context, rec record, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	var nrev uint64
	if rec.State == stateAcked {
		// A settled item's record is kept for the dedup window only: the
		// bucket's own per-message TTL removes it.
		msg := nats.NewMsg(s.kvSubject + itemKey(rec.ID))
		msg.Data = b
		var ack *jetstream.PubAck
		ack, err = s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(s.cfg.DedupWindow))
		if err == nil {
			nrev = ack.Sequence
		} else if isWrongLastSeq(err) {
			err = jetstream.ErrKeyRevisionMismatch
		}
	} else {
		nrev, err = s.kv.Update(ctx, itemKey(rec.ID), b, rev)
	}
	if err != nil {
		s.cacheDrop(rec.ID)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, errRevision
		}
		return 0, fmt.Errorf("work: update record %s: %w", rec.ID, err)
	}
	s.cachePut(rec, nrev)
	return nrev, nil
}

// isWrongLastSeq reports a failed compare-and-set publish (10071, or 10164
// on a replicated stream).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// isNotFound reports a missing stream message.
func isNotFound(err error) bool { return errors.Is(err, jetstream.ErrMsgNotFound) }

package work

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }

// maxTenantLen bounds a tenant name.
const maxTenantLen = 128

// msgID is the Nats-Msg-Id of the record's current copy on the work stream.
func msgID(rec record) string {
	if rec.Replays == 0 {
		return rec.ID
	}
	return rec.ID + ":r" + strconv.Itoa(rec.Replays)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ceilingOf returns the caller's ceiling, Interactive when unset.
func ceilingOf(c protocol.Caller) priority.Class {
	if c.Ceiling.Valid() {
		return c.Ceiling
	}
	return priority.Interactive
}

func (s *Service) submit(ctx context.Context, req protocol.Request) (any, error) {
	var in submitRequest
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	if !protocol.ValidName(in.Type) {
		return nil, protocol.BadRequest("invalid type %q: one subject token of 1..128 [A-Za-z0-9_-]", in.Type)
	}
	cls := priority.ForTaskType(in.Type)
	if in.Class != "" {
		c, err := priority.Parse(in.Class)
		if err != nil {
			return nil, protocol.BadRequest("unknown class %q", in.Class)
		}
		cls = c
	}
	cls = cls.Clamp(ceilingOf(req.Caller))
	if len(in.Tenant) > maxTenantLen || !utf8.ValidString(in.Tenant) {
		return nil, protocol.BadRequest("invalid tenant: at most %d bytes of UTF-8", maxTenantLen)
	}
	switch {
	case in.MaxAttempts == 0:
		in.MaxAttempts = s.cfg.MaxAttempts
	case in.MaxAttempts < 0 || in.MaxAttempts > MaxMaxAttempts:
		return nil, protocol.BadRequest("invalid max_attempts %d: 1..%d", in.MaxAttempts, MaxMaxAttempts)
	}
	if len(in.Payload) == 0 {
		in.Payload = json.RawMessage("null")
	}
	if in.ID == "" {
		in.ID = newID()
	} else if !validID(in.ID) {
		return nil, protocol.BadRequest("invalid id %q: 1..128 of [A-Za-z0-9_=-]", in.ID)
	}
	p := pair{cls, in.Type}
	if _, err := s.ensureConsumer(ctx, p); err != nil {
		return nil, err
	}

	unlock := s.lock(in.ID)
	defer unlock()
	rec := record{ID: in.ID, Class: cls.String(), Type: in.Type, Tenant: in.Tenant, MaxAttempts: in.MaxAttempts, State: stateQueued}
	rev, exists, err := s.createRecord(ctx, rec)
	if err != nil {
		return nil, err
	}
	if exists {
		old, oldRev, found, err := s.getRecord(ctx, in.ID, true)
		if err != nil {
			return nil, err
		}
		if found && (old.Seq != 0 || old.State != stateQueued) {
			return submitReply{ID: in.ID, Duplicate: true}, nil
		}
		if !found { // deleted meanwhile: treat as new
			if rev, _, err = s.createRecord(ctx, rec); err != nil {
				return nil, err
			}
		} else {
			// A record without a sequence: an earlier submit stopped between
			// the record and the publish, or is still running. Publishing
			// again under the same Nats-Msg-Id is deduplicated by JetStream.
			rec, rev = old, oldRev
			if c, err := priority.Parse(rec.Class); err == nil {
				p = pair{c, rec.Type}
				if _, err := s.ensureConsumer(ctx, p); err != nil {
					return nil, err
				}
			}
		}
	}
	item := storedItem{ID: rec.ID, Type: rec.Type, Class: rec.Class, Tenant: rec.Tenant, Payload: in.Payload, MaxAttempts: rec.MaxAttempts}
	ack, err := s.publishItem(ctx, p, item, msgID(rec))
	if err != nil {
		return nil, err
	}
	rec.Seq = ack.Sequence
	if !ack.Duplicate {
		s.published(p, ack.Sequence)
	}
	if _, err := s.updateRecord(ctx, rec, rev); err != nil && err != errRevision {
		return nil, err
	}
	return submitReply{ID: rec.ID, Duplicate: exists && ack.Duplicate}, nil
}

// Headers of a work-stream message; the body is the payload, verbatim.
const (
	hdrType        = "Edict-Type"
	hdrClass       = "Edict-Class"
	hdrTenant      = "Edict-Tenant"
	hdrMaxAttempts = "Edict-Max-Attempts"
)

// publishItem puts item on its pair's subject with a Nats-Msg-Id.
func (s *Service) publishItem(ctx context.Context, p pair, item storedItem, id string) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(p.subject())
	msg.Data = item.Payload
	msg.Header.Set(hdrItemID, item.ID)
	msg.Header.Set(hdrType, item.Type)
	msg.Header.Set(hdrClass, item.Class)
	if item.Tenant != "" {
		msg.Header.Set(hdrTenant, item.Tenant)
	}
	msg.Header.Set(hdrMaxAttempts, strconv.Itoa(item.MaxAttempts))
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(StreamName))
	if err != nil {
		return nil, fmt.Errorf("work: publish %s: %w", item.ID, err)
	}
	return ack, nil
}

// itemFromMsg reads an item back from a work-stream message's headers and body.
func itemFromMsg(h nats.Header, data []byte) (storedItem, bool) {
	it := storedItem{
		ID:      h.Get(hdrItemID),
		Type:    h.Get(hdrType),
		Class:   h.Get(hdrClass),
		Tenant:  h.Get(hdrTenant),
		Payload: json.RawMessage(data),
	}
	n, err := strconv.Atoi(h.Get(hdrMaxAttempts))
	if err != nil || n < 1 || n > MaxMaxAttempts || !validID(it.ID) || !protocol.ValidName(it.Type) {
		return storedItem{}, false
	}
	if _, err := priority.Parse(it.Class); err != nil {
		return storedItem{}, false
	}
	it.MaxAttempts = n
	if len(it.Payload) == 0 {
		it.Payload = json.RawMessage("null")
	}
	return it, true
}

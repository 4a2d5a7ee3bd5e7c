package work

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// stats answers per class queued, in flight and dead, and per lane queued.
// Queued counts the stored items that are not leased, including items
// waiting out a retry or defer delay.
func (s *Service) stats(ctx context.Context, req protocol.Request) (any, error) {
	var in struct{}
	if err := protocol.Decode(req.Body, &in); err != nil {
		return nil, err
	}
	stored, err := subjectCounts(ctx, s.stream, SubjectPrefix)
	if err != nil {
		return nil, err
	}
	dead, err := subjectCounts(ctx, s.dead, DeadSubjectPrefix)
	if err != nil {
		return nil, err
	}
	inflight := make(map[pair]int)
	now := s.cfg.Now()
	s.mu.Lock()
	for _, l := range s.leases {
		if l.until.After(now) {
			inflight[pair{l.class, l.typ}]++
		}
	}
	s.mu.Unlock()

	out := statsReply{Classes: make(map[string]classStats), Lanes: make(map[string]laneStats)}
	for _, c := range priority.All {
		out.Classes[c.String()] = classStats{}
	}
	for _, l := range priority.LaneNames() {
		out.Lanes[l] = laneStats{}
	}
	for p, n := range stored {
		q := n - inflight[p]
		if q < 0 {
			q = 0
		}
		cs := out.Classes[p.class.String()]
		cs.Queued += q
		out.Classes[p.class.String()] = cs
		ls := out.Lanes[priority.LaneOf(p.typ)]
		ls.Queued += q
		out.Lanes[priority.LaneOf(p.typ)] = ls
	}
	for p, n := range inflight {
		cs := out.Classes[p.class.String()]
		cs.InFlight += n
		out.Classes[p.class.String()] = cs
	}
	for p, n := range dead {
		cs := out.Classes[p.class.String()]
		cs.Dead += n
		out.Classes[p.class.String()] = cs
	}
	return out, nil
}

// subjectCounts returns the stored message count of every <prefix><class>.<type> subject.
func subjectCounts(ctx context.Context, st jetstream.Stream, prefix string) (map[pair]int, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	out := make(map[pair]int, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		cls, typ, ok := strings.Cut(strings.TrimPrefix(subj, prefix), ".")
		c, err := priority.Parse(cls)
		if !ok || err != nil {
			continue
		}
		out[pair{c, typ}] += int(n)
	}
	return out, nil
}

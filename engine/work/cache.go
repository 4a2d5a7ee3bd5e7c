package work

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// maxCachedRecords bounds the record cache; past it an arbitrary entry is
// evicted (a miss only costs a KV get).
const maxCachedRecords = 1 << 18

// expectWindow is how long after a local publish to a queue a no-wait fetch
// that finds nothing is repeated with a short wait: the consumer learns of
// a stored message asynchronously, so a fetch right after the publish can
// miss it.
const expectWindow = 100 * time.Millisecond

// cachedRec is a record as this engine last wrote or read it, with its
// revision. Every write is a compare-and-set on that revision, so a stale
// entry (another engine changed the record) costs one failed write and a
// reload, never a wrong decision.
type cachedRec struct {
	rec record
	rev uint64
}

// getRecord returns the item's record, from the cache unless fresh.
// Callers hold the item's stripe lock.
func (s *Service) getRecord(ctx context.Context, id string, fresh bool) (record, uint64, bool, error) {
	if !fresh {
		s.cmu.Lock()
		c, ok := s.recs[id]
		s.cmu.Unlock()
		if ok {
			return c.rec, c.rev, true, nil
		}
	}
	rec, rev, found, err := s.loadRecord(ctx, id)
	if err != nil || !found {
		s.cacheDrop(id)
		return rec, rev, found, err
	}
	s.cachePut(rec, rev)
	return rec, rev, true, nil
}

// cachePut remembers rec at rev. Settled records are not kept.
func (s *Service) cachePut(rec record, rev uint64) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if rec.State == stateAcked || rec.State == stateDead {
		delete(s.recs, rec.ID)
		return
	}
	if _, ok := s.recs[rec.ID]; !ok && len(s.recs) >= maxCachedRecords {
		for id := range s.recs {
			delete(s.recs, id)
			break
		}
	}
	s.recs[rec.ID] = cachedRec{rec: rec, rev: rev}
}

// cacheDrop forgets id's cached record.
func (s *Service) cacheDrop(id string) {
	s.cmu.Lock()
	delete(s.recs, id)
	s.cmu.Unlock()
}

// queueState is this engine's view of the work stream's queues: stored
// message counts per (class, type) from one Stream.Info, kept current by
// this engine's own publishes and removals, and the first stored sequence
// of a queue when known. It decides which queues a claim fetches from; a
// claim re-reads the counts when they are older than countsMaxAge and
// before it would answer empty, so another engine's submits are never
// missed.
type queueState struct {
	at         time.Time          // when counts were last read from the stream
	refreshing bool               // a claim is re-reading them because they aged
	counts     map[pair]int64     // stored messages
	heads      map[pair]uint64    // first stored sequence; absent: unknown
	pubAt      map[pair]time.Time // this engine's last publish
	// delayed holds, per queue, when the deliveries this engine put back
	// with a delay (retry, defer, quota) become available again. It is a
	// hint that saves a fetch, never the mechanism: JetStream redelivers.
	delayed map[pair][]time.Time
}

// refreshCounts re-reads every queue's stored count with one Stream.Info,
// forgets the cached first sequences and takes on the consumers of queues
// it did not know.
func (s *Service) refreshCounts(ctx context.Context) error {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(SubjectPrefix+">"))
	if err != nil {
		return fmt.Errorf("work: stream info: %w", err)
	}
	counts := make(map[pair]int64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		if p, ok := pairOf(subj, SubjectPrefix); ok {
			counts[p] += int64(n)
		}
	}
	s.qmu.Lock()
	s.q.at = time.Now()
	s.q.counts = counts
	clear(s.q.heads)
	s.qmu.Unlock()
	// A queue another engine created: take on its consumer, so claims
	// here see it. A queue whose consumer cannot be made (too many types)
	// is tried once.
	for p := range counts {
		s.mu.Lock()
		_, known := s.consumers[p]
		_, failed := s.noConsumer[p]
		s.mu.Unlock()
		if known || failed {
			continue
		}
		if _, err := s.ensureConsumer(ctx, p); err != nil {
			s.cfg.Logger.Warn("work: consumer of a queue found in the stream", "consumer", p.consumerName(), "err", err)
			s.mu.Lock()
			s.noConsumer[p] = struct{}{}
			s.mu.Unlock()
		}
	}
	return nil
}

// pairOf parses <prefix><class>.<type>.
func pairOf(subj, prefix string) (pair, bool) {
	rest, ok := strings.CutPrefix(subj, prefix)
	if !ok {
		return pair{}, false
	}
	cls, typ, ok := strings.Cut(rest, ".")
	c, err := priority.Parse(cls)
	if !ok || err != nil || c.String() != cls || !protocol.ValidName(typ) {
		return pair{}, false
	}
	return pair{c, typ}, true
}

// published records this engine's publish of a new message seq to p.
func (s *Service) published(p pair, seq uint64) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.q.counts[p] <= 0 {
		s.q.heads[p] = seq
	}
	s.q.counts[p]++
	s.q.pubAt[p] = time.Now()
}

// removed records that this engine acknowledged or terminated message seq
// of p, which takes it off the work-queue stream.
func (s *Service) removed(p pair, seq uint64) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if n := s.q.counts[p]; n > 1 {
		s.q.counts[p] = n - 1
	} else {
		delete(s.q.counts, p)
	}
	if s.q.heads[p] == seq {
		delete(s.q.heads, p)
	}
}

// putBack records that this engine Nak'd a delivery of p with delay.
func (s *Service) putBack(p pair, delay time.Duration) {
	if delay <= 0 {
		return
	}
	s.qmu.Lock()
	s.q.delayed[p] = append(s.q.delayed[p], time.Now().Add(delay))
	s.qmu.Unlock()
}

// available returns, for each of ps, how many of its stored messages are
// not known to be leased by this engine or waiting out a delay this engine
// set; leased counts this engine's live leases per queue.
func (s *Service) available(ps []pair, leased map[pair]int) map[pair]int64 {
	now := time.Now()
	s.qmu.Lock()
	defer s.qmu.Unlock()
	out := make(map[pair]int64, len(ps))
	for _, p := range ps {
		n := s.q.counts[p] - int64(leased[p])
		if d := s.q.delayed[p]; len(d) > 0 {
			keep := d[:0]
			for _, t := range d {
				if t.After(now) {
					keep = append(keep, t)
				}
			}
			if len(keep) == 0 {
				delete(s.q.delayed, p)
			} else {
				s.q.delayed[p] = keep
			}
			n -= int64(len(keep))
		}
		out[p] = n
	}
	return out
}

// expecting reports whether this engine published to p within expectWindow.
func (s *Service) expecting(p pair) bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	t, ok := s.q.pubAt[p]
	return ok && time.Since(t) < expectWindow
}

// head returns p's first stored sequence, reading it when not cached
// (^0 for an empty queue).
func (s *Service) head(ctx context.Context, p pair) (uint64, error) {
	s.qmu.Lock()
	h, ok := s.q.heads[p]
	s.qmu.Unlock()
	if ok {
		return h, nil
	}
	m, err := s.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(p.subject()))
	switch {
	case err == nil:
		h = m.Sequence
	case isNotFound(err):
		return ^uint64(0), nil
	default:
		return 0, err
	}
	s.qmu.Lock()
	s.q.heads[p] = h
	s.qmu.Unlock()
	return h, nil
}

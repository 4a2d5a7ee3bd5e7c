package work

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// hdrItemID names the item id on a work-stream message.
const hdrItemID = "Edict-Item-Id"

// opNames lists the work operations in docs/PROTOCOL.md order.
var opNames = []string{"submit", "claim", "ack", "retry", "defer", "extend", "dead", "dead_list", "dead_replay", "stats"}

// pair is one (class, type) queue with its consumer.
type pair struct {
	class priority.Class
	typ   string
}

func (p pair) subject() string     { return SubjectPrefix + p.class.String() + "." + p.typ }
func (p pair) deadSubject() string { return DeadSubjectPrefix + p.class.String() + "." + p.typ }
func (p pair) consumerName() string {
	return "w_" + p.class.String() + "_" + p.typ
}

// lease is an in-memory view of one live lease, for tenant quotas, stats
// and shortened-lease expiry. Records are the durable truth.
type lease struct {
	tenant    string
	class     priority.Class
	typ       string
	delivered uint64
	until     time.Time
	// timer ends a shortened lease, or records an unrecorded grant.
	timer *time.Timer
	// unrecorded is an unrecorded grant (claim.go); seq and reply are what
	// recording it writes.
	unrecorded bool
	seq        uint64
	reply      string
	nonce      uint64
}

// Service is the work-item service of the engine. It implements
// protocol.Handler for the work operations. Create it with Open.
type Service struct {
	cfg    Config
	js     jetstream.JetStream
	nc     *nats.Conn
	stream jetstream.Stream
	dead   jetstream.Stream
	kv     jetstream.KeyValue
	key    []byte
	// kvSubject prefixes the bucket's keys on its stream: $KV.<bucket>.
	kvSubject string
	// pullPrefix prefixes a consumer's next-message API subject.
	pullPrefix string

	locks [256]sync.Mutex // striped per item id

	// base is cancelled by Close; expiry timers run under it.
	base   context.Context
	cancel context.CancelFunc
	timers sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	consumers map[pair]jetstream.Consumer
	// ackNexts counts the acks sent as "+NXT" (for tests).
	ackNexts atomic.Int64
	// noConsumer holds the queues found in the stream whose consumer could
	// not be made (refreshCounts tries each once).
	noConsumer map[pair]struct{}
	types      map[string]struct{}
	leases     map[string]*lease // by item id
	pullers    map[pair]*puller

	cmu  sync.Mutex
	recs map[string]cachedRec // record cache by item id

	qmu sync.Mutex
	q   queueState

	// openedAt is when Open ran, or when the connection last found a
	// different server; grants are all recorded for one Lease after it
	// (claim.go, "Unrecorded grants"). serverID is that server. Both are
	// guarded by mu.
	openedAt time.Time
	serverID string
}

var _ protocol.Handler = (*Service)(nil)

// Open creates or updates the work stream EDICT_WORK, the dead-letter
// stream EDICT_WORK_DEAD and the state bucket EDICT_WORK_STATE on js, loads
// (or creates) the token key, finds the existing consumers and rebuilds the
// live leases. ctx bounds the setup only.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	s := &Service{
		cfg:        cfg,
		kvSubject:  "$KV." + StateBucket + ".",
		pullPrefix: "$JS.API.CONSUMER.MSG.NEXT." + StreamName + ".",
		js:         js,
		nc:         js.Conn(),
		consumers:  make(map[pair]jetstream.Consumer),
		noConsumer: make(map[pair]struct{}),
		types:      make(map[string]struct{}),
		leases:     make(map[string]*lease),
		pullers:    make(map[pair]*puller),
		recs:       make(map[string]cachedRec),
		q:          queueState{counts: map[pair]int64{}, heads: map[pair]uint64{}, pubAt: map[pair]time.Time{}, delayed: map[pair][]time.Time{}},
	}
	var err error
	s.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "edict durable work items",
		Subjects:    []string{SubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("work: stream %s: %w", StreamName, err)
	}
	s.dead, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DeadStreamName,
		Description: "edict dead-lettered work items",
		Subjects:    []string{DeadSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("work: stream %s: %w", DeadStreamName, err)
	}
	s.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "edict work-item records and the token key",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		// Enables the per-message TTL of settled records (DedupWindow);
		// the marker an expiry leaves is itself removed after a minute.
		LimitMarkerTTL: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("work: bucket %s: %w", StateBucket, err)
	}
	if s.key, err = s.loadKey(ctx); err != nil {
		return nil, err
	}
	if err := s.findConsumers(ctx); err != nil {
		return nil, err
	}
	if err := s.refreshCounts(ctx); err != nil {
		return nil, err
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.openedAt, s.serverID = cfg.Now(), s.nc.ConnectedServerId()
	if err := s.rebuildLeases(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// loadKey returns the token HMAC key, creating it on first use.
func (s *Service) loadKey(ctx context.Context) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("work: token key: %w", err)
	}
	if _, err := s.kv.Create(ctx, keyHMAC, key); err == nil {
		return key, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("work: store token key: %w", err)
	}
	e, err := s.kv.Get(ctx, keyHMAC)
	if err != nil {
		return nil, fmt.Errorf("work: load token key: %w", err)
	}
	if len(e.Value()) != 32 {
		return nil, fmt.Errorf("work: token key in %s has %d bytes, want 32", StateBucket, len(e.Value()))
	}
	return e.Value(), nil
}

// findConsumers registers the consumers already on the stream, updating
// their configuration to this Config.
func (s *Service) findConsumers(ctx context.Context) error {
	lister := s.stream.ListConsumers(ctx)
	var found []pair
	for info := range lister.Info() {
		subj := info.Config.FilterSubject
		rest, ok := strings.CutPrefix(subj, SubjectPrefix)
		if !ok {
			continue
		}
		cls, typ, ok := strings.Cut(rest, ".")
		c, err := priority.Parse(cls)
		if !ok || err != nil || !protocol.ValidName(typ) || c.String() != cls {
			continue
		}
		found = append(found, pair{c, typ})
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("work: list consumers: %w", err)
	}
	for _, p := range found {
		if _, err := s.ensureConsumer(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// ensureConsumer returns the pair's consumer, creating (or updating) it
// when this engine has not seen the pair yet.
func (s *Service) ensureConsumer(ctx context.Context, p pair) (jetstream.Consumer, error) {
	s.mu.Lock()
	c, ok := s.consumers[p]
	_, known := s.types[p.typ]
	n := len(s.types)
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	if !known && n >= MaxTypes {
		return nil, protocol.BadRequest("too many task types: at most %d distinct types", MaxTypes)
	}
	c, err := s.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       p.consumerName(),
		Description:   "edict work items " + p.class.String() + " " + p.typ,
		FilterSubject: p.subject(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
		AckWait:       s.cfg.Lease,
		MaxAckPending: -1,
		Replicas:      s.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("work: consumer %s: %w", p.consumerName(), err)
	}
	s.mu.Lock()
	s.consumers[p] = c
	s.types[p.typ] = struct{}{}
	s.mu.Unlock()
	return c, nil
}

// rebuildLeases reads every record once and registers the live leases.
// A shortened lease's expiry timer is re-armed; one that expired while no
// engine ran is ended now (its timer was lost with the old process).
func (s *Service) rebuildLeases(ctx context.Context) error {
	w, err := s.kv.Watch(ctx, itemKeyPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("work: watch records: %w", err)
	}
	defer w.Stop()
	var live []record
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("work: rebuild leases: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				done = true
				continue
			}
			var rec record
			if err := decodeJSON(e.Value(), &rec); err != nil || rec.State != stateLeased {
				continue
			}
			live = append(live, rec)
		}
	}
	now := s.cfg.Now()
	for _, rec := range live {
		c, err := priority.Parse(rec.Class)
		if err != nil {
			continue
		}
		if rec.LeaseUntil.After(now) {
			s.track(rec, c, false)
			continue
		}
		if now.Sub(rec.LeaseUntil) < s.cfg.Lease {
			// JetStream's AckWait has not necessarily run out yet.
			s.expire(rec.ID, rec.Delivered)
		}
	}
	return nil
}

// Close makes Handle answer 503, stops the lease timers and writes the
// grants it holds unrecorded into their records (claim.go), within 10 s.
// It does not touch the streams or the connection. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	type held struct {
		id        string
		delivered uint64
	}
	var unrecorded []held
	for id, l := range s.leases {
		if l.timer != nil && l.timer.Stop() {
			s.timers.Done()
		}
		l.timer = nil
		if l.unrecorded {
			unrecorded = append(unrecorded, held{id, l.delivered})
		}
	}
	s.mu.Unlock()
	// A clean shutdown records the grants it holds unrecorded, so the next
	// engine rebuilds them; only a crash loses the youngest (claim.go).
	ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
	for _, h := range unrecorded {
		s.recordGrant(ctx, h.id, h.delivered)
	}
	cancel()
	s.cancel()
	s.timers.Wait()
	s.closePullers()
	return nil
}

// Ops lists the work operations: submit, claim, ack, retry, defer, extend,
// dead, dead_list, dead_replay and stats.
func (s *Service) Ops() []string { return append([]string(nil), opNames...) }

// Handle serves one admitted work request. It decodes req.Body strictly and
// returns the reply value or a *protocol.Error. ctx bounds the request,
// including a claim's long poll.
func (s *Service) Handle(ctx context.Context, req protocol.Request) (any, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, protocol.Errorf(protocol.CodeBusy, "BUSY: work service closed, retry with backoff")
	}
	s.checkServer(s.cfg.Now())
	var (
		v   any
		err error
	)
	switch req.Op {
	case "submit":
		v, err = s.submit(ctx, req)
	case "claim":
		v, err = s.claim(ctx, req)
	case "ack":
		v, err = s.ack(ctx, req)
	case "retry":
		v, err = s.retry(ctx, req)
	case "defer":
		v, err = s.deferItem(ctx, req)
	case "extend":
		v, err = s.extend(ctx, req)
	case "dead":
		v, err = s.deadLetterOp(ctx, req)
	case "dead_list":
		v, err = s.deadList(ctx, req)
	case "dead_replay":
		v, err = s.deadReplay(ctx, req)
	case "stats":
		v, err = s.stats(ctx, req)
	default:
		return nil, protocol.NotFound("unknown work op %q", req.Op)
	}
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, protocol.As(err)
	}
	return v, nil
}

// lock locks id's stripe and returns its unlock.
func (s *Service) lock(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// settleReply sends an ack-protocol body (+ACK, -NAK …, +WPI, +TERM …) to a
// delivery's reply subject and waits for JetStream's confirmation.
func (s *Service) settleReply(ctx context.Context, reply string, body string) error {
	if reply == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.nc.RequestWithContext(ctx, reply, []byte(body)); err != nil {
		return fmt.Errorf("work: settle %q: %w", body, err)
	}
	return nil
}

func nakBody(delay time.Duration) string {
	if delay <= 0 {
		return "-NAK"
	}
	return fmt.Sprintf("-NAK {\"delay\": %d}", delay.Nanoseconds())
}

// track records a live lease, arming an expiry timer when the lease is
// shorter than the consumers' AckWait, or the recording timer of an
// unrecorded grant.
func (s *Service) track(rec record, c priority.Class, unrecorded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.leases[rec.ID]; old != nil && old.timer != nil && old.timer.Stop() {
		s.timers.Done()
	}
	l := &lease{tenant: rec.Tenant, class: c, typ: rec.Type, delivered: rec.Delivered, until: rec.LeaseUntil,
		unrecorded: unrecorded, seq: rec.Seq, reply: rec.Reply, nonce: rec.Nonce}
	s.leases[rec.ID] = l
	if s.closed {
		return
	}
	if unrecorded {
		id, delivered := rec.ID, rec.Delivered
		s.timers.Add(1)
		l.timer = time.AfterFunc(s.cfg.RecordAfter, func() {
			defer s.timers.Done()
			ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
			defer cancel()
			s.recordGrant(ctx, id, delivered)
		})
		return
	}
	if d := rec.LeaseUntil.Sub(s.cfg.Now()); d < s.cfg.Lease {
		id, delivered := rec.ID, rec.Delivered
		s.timers.Add(1)
		l.timer = time.AfterFunc(d, func() {
			defer s.timers.Done()
			s.expire(id, delivered)
		})
	}
}

// settled reports whether unrecorded grants may be given at now: one Lease
// after Open and after the last change of server (checkServer, run by
// Handle before every operation).
func (s *Service) settled(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.openedAt) >= s.cfg.Lease
}

// checkServer notices that the connection now reaches a different server
// than before (a restarted server has a new id; a reconnect may land on
// another node of a cluster): it drops the record cache and starts the
// recording window again, since that server may have lost state.
func (s *Service) checkServer(now time.Time) {
	id := s.nc.ConnectedServerId()
	s.mu.Lock()
	if id == s.serverID {
		s.mu.Unlock()
		return
	}
	s.serverID, s.openedAt = id, now
	s.mu.Unlock()
	s.cmu.Lock()
	clear(s.recs)
	s.cmu.Unlock()
	s.cfg.Logger.Info("work: connected to another server; recording every grant for one lease", "server", id)
}

// recordGrant writes an unrecorded grant that is still held into the
// item's record (claim.go, "Unrecorded grants").
func (s *Service) recordGrant(ctx context.Context, id string, delivered uint64) {
	unlock := s.lock(id)
	defer unlock()
	s.mu.Lock()
	l := s.leases[id]
	if l == nil || !l.unrecorded || l.delivered != delivered {
		s.mu.Unlock()
		return
	}
	seq, reply, until, nonce := l.seq, l.reply, l.until, l.nonce
	s.mu.Unlock()
	if !until.After(s.cfg.Now()) {
		return
	}
	rec, rev, found, err := s.getRecord(ctx, id, true)
	if err != nil || !found || rec.State != stateQueued || rec.Delivered != 0 || rec.Seq != seq {
		return // settled, or granted again, meanwhile
	}
	rec.State, rec.Delivered, rec.Reply, rec.LeaseUntil, rec.Nonce = stateLeased, delivered, reply, until, nonce
	if _, err := s.updateRecord(ctx, rec, rev); err != nil {
		if !errors.Is(err, errRevision) {
			s.cfg.Logger.Warn("work: record grant", "id", id, "err", err)
		}
		return
	}
	s.mu.Lock()
	if l := s.leases[id]; l != nil && l.delivered == delivered {
		l.unrecorded = false
	}
	s.mu.Unlock()
}

// untrack forgets a lease.
func (s *Service) untrack(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.leases[id]; l != nil {
		if l.timer != nil && l.timer.Stop() {
			s.timers.Done()
		}
		delete(s.leases, id)
	}
}

// tenantLeases counts the live leases of tenant, dropping expired ones.
func (s *Service) tenantLeases(tenant string) int {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, l := range s.leases {
		if !l.until.After(now) {
			// An expired lease's timer has fired already, if it had one.
			delete(s.leases, id)
			continue
		}
		if l.tenant == tenant {
			n++
		}
	}
	return n
}

// expire ends a shortened lease that nobody settled or extended: the
// delivery is Nak'd so JetStream hands it out again at once (counting as an
// attempt, as an expired lease does).
func (s *Service) expire(id string, delivered uint64) {
	unlock := s.lock(id)
	defer unlock()
	ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
	defer cancel()
	rec, rev, found, err := s.getRecord(ctx, id, false)
	if err != nil || !found || rec.State != stateLeased || rec.Delivered != delivered {
		return
	}
	if rec.LeaseUntil.After(s.cfg.Now()) {
		return // extended meanwhile; its own timer is armed
	}
	reply := rec.Reply
	rec.State, rec.Reply, rec.LeaseUntil = stateQueued, "", time.Time{}
	if _, err := s.updateRecord(ctx, rec, rev); err != nil {
		return
	}
	s.mu.Lock()
	if l := s.leases[id]; l != nil && l.delivered == delivered {
		delete(s.leases, id)
	}
	s.mu.Unlock()
	if err := s.settleReply(ctx, reply, "-NAK"); err != nil {
		s.cfg.Logger.Warn("work: nak expired lease", "id", id, "err", err)
	}
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/catalog"
	"github.com/edictrt/edict/engine/protocol"
)

// Store is an open K-way sharded graph store. It is safe for concurrent
// use; every method takes ctx first and, for graph operations, the graph
// name second (^[A-Za-z0-9_-]{1,128}$, else ErrInvalid).
//
// Writes go through the graph's shard writer and return after their
// transaction is fsync'd; ctx bounds only the wait for queue space (a full
// queue blocks until ctx is done): once queued, a write is carried out and
// the call returns its outcome. Reads run in a bbolt read transaction on the
// shard and never wait on a writer.
type Store struct {
	dir    string
	k      int
	shards []*shard
	cat    *catalog.Catalog
	m      *metrics
	log    *slog.Logger
	guards guards

	mu       sync.RWMutex // guards closed against inflight.Add
	closed   bool
	inflight sync.WaitGroup // submitters between the closed check and their enqueue
	closing  chan struct{}
	once     sync.Once
	closeErr error

	reshardMu sync.Mutex // one online move at a time
}

type shard struct {
	idx  int
	path string
	db   *bbolt.DB
	w    *writer
}

// Open opens the store in dir (created if needed), which holds graph-<n>.db
// for shards 0..K-1 and, optionally, catalog.db. With no shard files K is
// cfg.Shards; otherwise the on-disk count wins. A retired graph.db, a
// non-canonical (graph-01.db), invalid, non-regular or non-contiguous layout
// is refused with an error wrapping ErrLayout that names the fix (edict
// migrate-shards). The catalog is attached when cfg.Catalog is set or
// catalog.db exists.
func Open(dir string, cfg Config) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	k, err := DiscoverShards(dir)
	if err != nil {
		return nil, err
	}
	if k == 0 {
		k = cfg.shards()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: dir, k: k, log: log, closing: make(chan struct{}), guards: guards{m: map[string]*guard{}}}
	fail := func(err error) (*Store, error) {
		for _, sh := range s.shards {
			sh.db.Close()
		}
		if s.cat != nil {
			s.cat.Close()
		}
		return nil, err
	}
	for i := range k {
		p := filepath.Join(dir, ShardFile(i))
		db, err := bbolt.Open(p, 0o600, &bbolt.Options{
			Timeout:         time.Second,
			InitialMmapSize: cfg.mmapSize(),
			FreelistType:    bbolt.FreelistMapType,
		})
		if err != nil {
			if errors.Is(err, bbolt.ErrTimeout) {
				err = fmt.Errorf("%w (is another engine running on %s?)", err, dir)
			}
			return fail(fmt.Errorf("store: open shard %s: %w", p, err))
		}
		s.shards = append(s.shards, &shard{idx: i, path: p, db: db, w: &writer{
			shard: i, db: db, ch: make(chan *op, cfg.queueSize()),
			maxBatch: cfg.flushThreshold(), linger: cfg.linger(), done: make(chan struct{}),
		}})
	}
	catPath := filepath.Join(dir, catalog.FileName)
	if _, err := os.Stat(catPath); cfg.Catalog || err == nil {
		c, err := catalog.Open(catPath)
		if err != nil {
			return fail(fmt.Errorf("store: %w", err))
		}
		s.cat = c
	}
	s.m, err = newMetrics(cfg.MeterProvider, s.shards)
	if err != nil {
		return fail(fmt.Errorf("store: metrics: %w", err))
	}
	for _, sh := range s.shards {
		sh.w.m = s.m
		go sh.w.run()
	}
	log.Info("store: opened", "dir", dir, "shards", k, "catalog", s.cat != nil)
	return s, nil
}

// Close stops the writers (queued writes are committed first) and closes
// every file. It is idempotent; afterwards every call returns ErrClosed.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
		s.inflight.Wait()
		for _, sh := range s.shards {
			close(sh.w.ch)
		}
		var errs []error
		for _, sh := range s.shards {
			<-sh.w.done
			errs = append(errs, sh.db.Close())
		}
		if s.cat != nil {
			errs = append(errs, s.cat.Close())
		}
		errs = append(errs, s.m.reg.Unregister())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// Check runs bbolt's consistency check on every shard and returns the
// problems found (nil when every file is consistent).
func (s *Store) Check(ctx context.Context) error {
	if s.isClosed() {
		return ErrClosed
	}
	var errs []error
	for _, sh := range s.shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		errs = append(errs, CheckDB(sh.db))
	}
	return errors.Join(errs...)
}

// CheckDB runs bbolt's consistency check on db.
func CheckDB(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("store: check %s: %w", db.Path(), errors.Join(errs...))
		}
		return nil
	})
}

// Layout returns the shard count, the shard file names and whether a
// catalog is attached.
func (s *Store) Layout() Layout {
	files := make([]string, s.k)
	for i := range files {
		files[i] = ShardFile(i)
	}
	return Layout{Shards: s.k, Files: files, Catalog: s.cat != nil}
}

// Shards returns K.
func (s *Store) Shards() int { return s.k }

// Catalog returns the attached catalog, or nil.
func (s *Store) Catalog() *catalog.Catalog { return s.cat }

// Sanitize maps a graph name to the name its route is hashed from (see
// catalog.Sanitize): ASCII letters, digits and "-_." kept, every other
// character becomes "_".
func Sanitize(graph string) string { return catalog.Sanitize(graph) }

// ShardIndex is the hash route of graph among k shards: FNV-1a 64-bit over
// Sanitize(graph), mod k; k ≤ 1 gives 0.
func ShardIndex(graph string, k int) int { return catalog.HashShard(graph, k) }

func checkGraph(graph string) error {
	if !protocol.ValidName(graph) {
		return invalid("graph name %q must match ^[A-Za-z0-9_-]{1,128}$", graph)
	}
	return nil
}

// route resolves graph's shard. With a catalog it holds the graph's routing
// guard shared until release is called: a writer releases it once its op is
// queued, a reader once its read transaction has begun, so a move can never
// lose, misroute or hide either.
func (s *Store) route(graph string) (*shard, func()) {
	if s.cat == nil {
		return s.shards[ShardIndex(graph, s.k)], func() {}
	}
	g := s.guards.acquire(graph)
	g.mu.RLock()
	sh := s.shards[s.cat.ResolveShard(graph, s.k)]
	return sh, func() { g.mu.RUnlock(); s.guards.release(graph, g) }
}

// submit queues fn on sh's writer and waits for its commit. release is
// called once fn is queued (or refused).
func (s *Store) submit(ctx context.Context, sh *shard, release func(), fn func(tx *bbolt.Tx) (any, error)) (any, error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		release()
		return nil, ErrClosed
	}
	s.inflight.Add(1)
	s.mu.RUnlock()
	o := &op{fn: fn, done: make(chan struct{})}
	select {
	case sh.w.ch <- o:
	case <-ctx.Done():
		s.inflight.Done()
		release()
		return nil, ctx.Err()
	case <-s.closing:
		s.inflight.Done()
		release()
		return nil, ErrClosed
	}
	s.inflight.Done()
	release()
	<-o.done // the writer completes every queued op, also while closing
	return o.res, o.err
}

// update runs fn on graph's bucket (created, with Global metadata, if
// absent) in graph's shard writer.
func (s *Store) update(ctx context.Context, graph string, fn func(g *gtx) (any, error)) (any, error) {
	if err := checkGraph(graph); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sh, release := s.route(graph)
	return s.submit(ctx, sh, release, func(tx *bbolt.Tx) (any, error) {
		g, err := openGraphW(tx, graph, "")
		if err != nil {
			return nil, err
		}
		r, err := fn(g)
		if err != nil {
			return nil, err
		}
		return r, g.flush()
	})
}

// view runs fn in a read transaction on graph's shard; g is nil when the
// graph does not exist.
func (s *Store) view(ctx context.Context, graph string, fn func(g *gtx) error) error {
	if err := checkGraph(graph); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	sh, release := s.route(graph)
	tx, err := sh.db.Begin(false)
	release()
	if err != nil {
		if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
			return ErrClosed
		}
		return err
	}
	defer tx.Rollback()
	return fn(openGraphR(tx, graph))
}

// guards is the table of per-graph routing guards; an entry lives while
// someone holds or waits for it, so only the moving graph is ever paused.
type guards struct {
	mu sync.Mutex
	m  map[string]*guard
}

type guard struct {
	mu   sync.RWMutex
	refs int
}

func (t *guards) acquire(graph string) *guard {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.m[graph]
	if g == nil {
		g = &guard{}
		t.m[graph] = g
	}
	g.refs++
	return g
}

func (t *guards) release(graph string, g *guard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g.refs--
	if g.refs == 0 {
		delete(t.m, graph)
	}
}

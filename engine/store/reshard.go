package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/rebalance"
)

// barrier waits until every op queued on sh before it has committed.
func (s *Store) barrier(ctx context.Context, sh *shard) error {
	_, err := s.submit(ctx, sh, func() {}, nil)
	return err
}

// CopyBucket copies src into dst verbatim: every key, value, nested bucket
// and sequence, nothing decoded. It returns the number of leaf rows copied
// per top-level sub-bucket name (for a graph bucket: meta, nodes, out, ...).
func CopyBucket(dst, src *bbolt.Bucket, counts map[string]int) error {
	return copyBucket(dst, src, "", counts)
}

func copyBucket(dst, src *bbolt.Bucket, top string, counts map[string]int) error {
	if err := dst.SetSequence(src.Sequence()); err != nil {
		return err
	}
	return src.ForEach(func(k, v []byte) error {
		if v == nil {
			nb, err := dst.CreateBucket(k)
			if err != nil {
				return err
			}
			t := top
			if t == "" {
				t = string(k)
			}
			return copyBucket(nb, src.Bucket(k), t, counts)
		}
		if counts != nil {
			counts[top]++
		}
		return dst.Put(k, v)
	})
}

// syncBucket makes dst equal to src, writing only what differs.
func syncBucket(dst, src *bbolt.Bucket) error {
	if dst.Sequence() != src.Sequence() {
		if err := dst.SetSequence(src.Sequence()); err != nil {
			return err
		}
	}
	err := src.ForEach(func(k, v []byte) error {
		if v == nil {
			if db := dst.Bucket(k); db != nil {
				return syncBucket(db, src.Bucket(k))
			}
			if dst.Get(k) != nil {
				if err := dst.Delete(k); err != nil {
					return err
				}
			}
			nb, err := dst.CreateBucket(k)
			if err != nil {
				return err
			}
			return copyBucket(nb, src.Bucket(k), "", nil)
		}
		if dst.Bucket(k) != nil {
			if err := dst.DeleteBucket(k); err != nil {
				return err
			}
		}
		if cur := dst.Get(k); cur == nil || !bytes.Equal(cur, v) {
			return dst.Put(k, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var gone [][]byte
	var goneB [][]byte
	if err := dst.ForEach(func(k, v []byte) error {
		isB := v == nil
		if isB && src.Bucket(k) == nil {
			goneB = append(goneB, bytes.Clone(k))
		} else if !isB && src.Get(k) == nil {
			gone = append(gone, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range gone {
		if err := dst.Delete(k); err != nil {
			return err
		}
	}
	for _, k := range goneB {
		if err := dst.DeleteBucket(k); err != nil {
			return err
		}
	}
	return nil
}

// copyGraph copies graph from a read transaction of src into dst through
// dst's writer: replace drops dst's rows first, otherwise only the
// difference is written.
func (s *Store) copyGraph(ctx context.Context, graph string, src, dst *shard, replace bool) error {
	stx, err := src.db.Begin(false)
	if err != nil {
		return err
	}
	defer stx.Rollback()
	sb := stx.Bucket([]byte(graph))
	name := []byte(graph)
	_, err = s.submit(ctx, dst, func() {}, func(tx *bbolt.Tx) (any, error) {
		db := tx.Bucket(name)
		if sb == nil || replace {
			if db != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return nil, err
				}
				db = nil
			}
			if sb == nil {
				return nil, nil
			}
		}
		if db == nil {
			nb, err := tx.CreateBucket(name)
			if err != nil {
				return nil, err
			}
			return nil, copyBucket(nb, sb, "", nil)
		}
		return nil, syncBucket(db, sb)
	})
	return err
}

// purge drops graph from sh through its writer.
func (s *Store) purge(ctx context.Context, graph string, sh *shard) error {
	_, err := s.submit(ctx, sh, func() {}, func(tx *bbolt.Tx) (any, error) {
		err := tx.DeleteBucket([]byte(graph))
		if errors.Is(err, bbolt.ErrBucketNotFound) {
			err = nil
		}
		return nil, err
	})
	return err
}

func hasGraph(sh *shard, graph string) (bool, error) {
	var ok bool
	err := sh.db.View(func(tx *bbolt.Tx) error {
		ok = tx.Bucket([]byte(graph)) != nil
		return nil
	})
	return ok, err
}

// Reshard moves graph to shard (mod K) online: a bulk copy while writes to
// it continue on the source, then — with only this graph quiesced — the
// delta, the durable catalog flip and the purge of the source. It returns
// the source and target shards (equal when there was nothing to move).
// Without a catalog it returns ErrNoCatalog.
//
// Crash safety: the order is import (bulk) → import (delta) → catalog flip →
// purge. Before the flip the route and the rows are on the source; after
// it, on the target; leftovers on a shard the graph does not route to are
// purged by the next Reshard of the graph, so a re-run completes an
// interrupted move. ctx cancels the move before the flip; once the catalog
// has flipped, the purge completes regardless.
func (s *Store) Reshard(ctx context.Context, graph string, shard int) (from, to int, err error) {
	if err := checkGraph(graph); err != nil {
		return 0, 0, err
	}
	if s.cat == nil {
		return 0, 0, ErrNoCatalog
	}
	if shard < 0 {
		return 0, 0, invalid("shard %d is negative", shard)
	}
	if s.isClosed() {
		return 0, 0, ErrClosed
	}
	s.reshardMu.Lock()
	defer s.reshardMu.Unlock()
	to = shard % s.k
	from = s.cat.ResolveShard(graph, s.k)
	// Leftovers of an interrupted move (a partial import, an unpurged
	// source) sit on shards the graph does not route to.
	for _, sh := range s.shards {
		if sh.idx == from || sh.idx == to {
			continue
		}
		if ok, err := hasGraph(sh, graph); err != nil {
			return from, to, err
		} else if ok {
			if err := s.purge(ctx, graph, sh); err != nil {
				return from, to, err
			}
		}
	}
	if from == to {
		return from, to, nil
	}
	src, dst := s.shards[from], s.shards[to]

	// Phase 1, not quiesced: flush the source writer, bulk-copy a snapshot.
	if err := s.barrier(ctx, src); err != nil {
		return from, to, err
	}
	if err := s.copyGraph(ctx, graph, src, dst, true); err != nil {
		return from, to, fmt.Errorf("store: reshard %s: bulk copy: %w", graph, err)
	}

	// Phase 2: quiesce only this graph.
	g := s.guards.acquire(graph)
	g.mu.Lock()
	defer func() { g.mu.Unlock(); s.guards.release(graph, g) }()
	if err := s.barrier(ctx, src); err != nil { // writes queued before the guard
		return from, to, err
	}
	if err := s.copyGraph(ctx, graph, src, dst, false); err != nil {
		return from, to, fmt.Errorf("store: reshard %s: delta copy: %w", graph, err)
	}
	a, _ := s.cat.Lookup(graph)
	if err := s.cat.Assign(ctx, graph, uint32(to), a.Node); err != nil {
		return from, to, fmt.Errorf("store: reshard %s: catalog flip: %w", graph, err)
	}
	if err := s.purge(context.WithoutCancel(ctx), graph, src); err != nil {
		return from, to, fmt.Errorf("store: reshard %s: purge source (a re-run completes it): %w", graph, err)
	}
	s.log.Info("store: resharded", "graph", graph, "from", from, "to", to)
	return from, to, nil
}

// CatalogGet returns graph's catalog entry, or ErrNotFound when it has none
// (also when no catalog is attached: every graph then routes by the hash).
func (s *Store) CatalogGet(ctx context.Context, graph string) (CatalogEntry, error) {
	if err := checkGraph(graph); err != nil {
		return CatalogEntry{}, err
	}
	if s.cat == nil {
		// No catalog: no graph has an entry; routing is the hash.
		return CatalogEntry{}, fmt.Errorf("%w: no catalog entry for graph %s (no tenant catalog attached)", ErrNotFound, graph)
	}
	a, ok := s.cat.Lookup(graph)
	if !ok {
		return CatalogEntry{}, fmt.Errorf("%w: no catalog entry for graph %s", ErrNotFound, graph)
	}
	return CatalogEntry{Graph: graph, Shard: int(a.Shard), Node: a.Node}, nil
}

// CatalogAssign records graph's placement (shard ≥ 0, routed mod K; node
// nil for this node). It moves no rows, so for a graph that has rows it
// accepts only the shard the graph already routes to (use Reshard to move
// it); otherwise ErrInvalid. Without a catalog it returns ErrNoCatalog.
func (s *Store) CatalogAssign(ctx context.Context, graph string, shard int, node *uint32) error {
	if err := checkGraph(graph); err != nil {
		return err
	}
	if s.cat == nil {
		return ErrNoCatalog
	}
	if shard < 0 || int64(shard) > int64(^uint32(0)) {
		return invalid("shard %d out of range", shard)
	}
	s.reshardMu.Lock()
	defer s.reshardMu.Unlock()
	g := s.guards.acquire(graph)
	g.mu.Lock()
	defer func() { g.mu.Unlock(); s.guards.release(graph, g) }()
	cur := s.shards[s.cat.ResolveShard(graph, s.k)]
	if cur.idx != shard%s.k {
		if err := s.barrier(ctx, cur); err != nil {
			return err
		}
		ok, err := hasGraph(cur, graph)
		if err != nil {
			return err
		}
		if ok {
			return invalid("graph %s has rows on shard %d: use reshard to move it", graph, cur.idx)
		}
	}
	return s.cat.Assign(ctx, graph, uint32(shard), node)
}

// ShardLoads returns every shard's graphs with their load (stored bytes),
// each graph counted on the shard it routes to.
func (s *Store) ShardLoads(ctx context.Context) ([]rebalance.ShardLoad, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var ps []rebalance.Placement
	for _, sh := range s.shards {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := sh.db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
				g := string(name)
				if checkGraph(g) != nil || s.cat.ResolveShard(g, s.k) != sh.idx {
					return nil
				}
				_, _, b := openGraphR(tx, g).stats()
				ps = append(ps, rebalance.Placement{Graph: g, Shard: sh.idx, Load: b})
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
	}
	return rebalance.LoadsFromPlacements(ps, s.k), nil
}

// RebalancePlan plans moves over the current shard loads (each graph's
// bytes) with rebalance.Plan.
func (s *Store) RebalancePlan(ctx context.Context, opts rebalance.Options) ([]rebalance.Move, error) {
	loads, err := s.ShardLoads(ctx)
	if err != nil {
		return nil, err
	}
	moves := rebalance.Plan(loads, opts)
	if moves == nil {
		moves = []rebalance.Move{}
	}
	return moves, nil
}

// RebalanceExecute applies moves (nil: plan now with default options)
// through Reshard, in order, and returns the moves applied (their From as
// found when each ran). Without a catalog it returns ErrNoCatalog.
func (s *Store) RebalanceExecute(ctx context.Context, moves []rebalance.Move) ([]rebalance.Move, error) {
	if s.cat == nil {
		return nil, ErrNoCatalog
	}
	if moves == nil {
		var err error
		if moves, err = s.RebalancePlan(ctx, rebalance.Options{}); err != nil {
			return nil, err
		}
	}
	return rebalance.Execute(ctx, s, moves)
}

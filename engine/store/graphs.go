package store

import (
	"context"
	"errors"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/protocol"
)

func checkGraphType(typ string) (string, error) {
	switch typ {
	case "":
		return GraphGlobal, nil
	case GraphAgent, GraphTeam, GraphGlobal, GraphBus:
		return typ, nil
	}
	return "", invalid("graph type %q is not Agent, Team, Global or Bus", typ)
}

// GraphCreate creates graph with type typ (GraphAgent, GraphTeam,
// GraphGlobal or GraphBus; "" means GraphGlobal; other values ErrInvalid).
// created is false when it already existed (its type is kept). Graphs are
// also created, as GraphGlobal, by their first write.
func (s *Store) GraphCreate(ctx context.Context, graph, typ string) (created bool, err error) {
	typ, err = checkGraphType(typ)
	if err != nil {
		return false, err
	}
	if err := checkGraph(graph); err != nil {
		return false, err
	}
	sh, release := s.route(graph)
	r, err := s.submit(ctx, sh, release, func(tx *bbolt.Tx) (any, error) {
		if tx.Bucket([]byte(graph)) != nil {
			return false, nil
		}
		_, err := openGraphW(tx, graph, typ)
		return err == nil, err
	})
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

// GraphType returns graph's type, or ErrNotFound.
func (s *Store) GraphType(ctx context.Context, graph string) (string, error) {
	var typ string
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil || g.meta == nil {
			return ErrNotFound
		}
		typ = string(g.meta.Get(mType))
		return nil
	})
	return typ, err
}

// GraphDelete drops graph and all its rows; deleted reports whether it
// existed.
func (s *Store) GraphDelete(ctx context.Context, graph string) (deleted bool, err error) {
	if err := checkGraph(graph); err != nil {
		return false, err
	}
	sh, release := s.route(graph)
	r, err := s.submit(ctx, sh, release, func(tx *bbolt.Tx) (any, error) {
		err := tx.DeleteBucket([]byte(graph))
		if errors.Is(err, bbolt.ErrBucketNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

// GraphClear removes graph's nodes, edges and KV rows but keeps it and its
// metadata (not on the wire).
func (s *Store) GraphClear(ctx context.Context, graph string) error {
	_, err := s.update(ctx, graph, func(g *gtx) (any, error) {
		for _, name := range [][]byte{bNodes, bLabels, bOut, bIn, bKV} {
			if err := g.b.DeleteBucket(name); err != nil {
				return nil, err
			}
			if _, err := g.b.CreateBucket(name); err != nil {
				return nil, err
			}
		}
		for _, k := range [][]byte{mNodes, mEdges, mBytes} {
			if err := g.meta.Delete(k); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	return err
}

// GraphList returns the names of every graph on every shard, sorted.
func (s *Store) GraphList(ctx context.Context) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var names []string
	for _, sh := range s.shards {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := sh.db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
				if protocol.ValidName(string(name)) {
					names = append(names, string(name))
				}
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	names = slices.Compact(names) // a graph mid-move may sit on two shards
	if names == nil {
		names = []string{}
	}
	return names, nil
}

// Stats returns graph's counts and the shard it routes to (zero counts for
// a graph that does not exist).
func (s *Store) Stats(ctx context.Context, graph string) (GraphStats, error) {
	var st GraphStats
	if err := checkGraph(graph); err != nil {
		return st, err
	}
	if s.isClosed() {
		return st, ErrClosed
	}
	sh, release := s.route(graph)
	tx, err := sh.db.Begin(false)
	release()
	if err != nil {
		return st, err
	}
	defer tx.Rollback()
	st.Nodes, st.Edges, st.Bytes = openGraphR(tx, graph).stats()
	st.Shard = sh.idx
	return st, nil
}

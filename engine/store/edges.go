package store

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
)

func checkEdgeKey(from, typ, to string) error {
	if err := checkID("from", from); err != nil {
		return err
	}
	if err := checkID("to", to); err != nil {
		return err
	}
	switch {
	case typ == "":
		return invalid("type is empty")
	case len(typ) > MaxTypeBytes:
		return tooLarge("type", len(typ), MaxTypeBytes)
	}
	return nil
}

func (g *gtx) edgePut(from, typ, to string, props []byte) error {
	existed, err := g.put(g.out, edgeKey(from, typ, to), props)
	if err != nil {
		return err
	}
	if !existed {
		g.dEdges++
	}
	return g.in.Put(edgeKey(to, typ, from), nil)
}

func (g *gtx) edgeDelete(from, typ, to string) (bool, error) {
	existed, err := g.del(g.out, edgeKey(from, typ, to))
	if err != nil || !existed {
		return false, err
	}
	g.dEdges--
	return true, g.in.Delete(edgeKey(to, typ, from))
}

// EdgePut stores the edge (From, Type, To), replacing its props if it
// exists. Endpoints need not exist as nodes.
func (s *Store) EdgePut(ctx context.Context, graph string, e Edge) error {
	if err := checkEdgeKey(e.From, e.Type, e.To); err != nil {
		return err
	}
	props, err := compactObject("props", e.Props)
	if err != nil {
		return err
	}
	_, err = s.update(ctx, graph, func(g *gtx) (any, error) {
		return nil, g.edgePut(e.From, e.Type, e.To, props)
	})
	return err
}

// EdgeGet returns the edge, or ErrNotFound.
func (s *Store) EdgeGet(ctx context.Context, graph, from, typ, to string) (Edge, error) {
	if err := checkEdgeKey(from, typ, to); err != nil {
		return Edge{}, err
	}
	var e Edge
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return ErrNotFound
		}
		v := g.out.Get(edgeKey(from, typ, to))
		if v == nil {
			return ErrNotFound
		}
		e = Edge{From: from, Type: typ, To: to, Props: edgeProps(v)}
		return nil
	})
	return e, err
}

func edgeProps(v []byte) json.RawMessage {
	if len(v) == 0 {
		return slices.Clone(emptyProps)
	}
	return slices.Clone(v)
}

// EdgeDelete removes the edge; deleted reports whether it existed.
func (s *Store) EdgeDelete(ctx context.Context, graph, from, typ, to string) (deleted bool, err error) {
	if err := checkEdgeKey(from, typ, to); err != nil {
		return false, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) { return g.edgeDelete(from, typ, to) })
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

func edgePrefix(id, typ string) []byte {
	p := lp(id)
	if typ != "" {
		p = appendLP(p, typ)
	}
	return p
}

// outEdges appends id's outgoing edges (of type typ unless "") up to limit.
func (g *gtx) outEdges(dst []Edge, id, typ string, limit int) ([]Edge, error) {
	prefix := edgePrefix(id, typ)
	c := g.out.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(dst) < limit; k, v = c.Next() {
		f, t, to, err := decodeEdgeKey(k)
		if err != nil {
			return nil, err
		}
		dst = append(dst, Edge{From: f, Type: t, To: to, Props: edgeProps(v)})
	}
	return dst, nil
}

// Neighbors returns the edges of node id in direction dir (Both: out edges
// first, then in edges; a self-loop once), only of type typ unless it is
// "", at most limit (0 means DefaultListLimit, capped at MaxListLimit). It
// reads the forward and reverse indexes, never scans the graph.
func (s *Store) Neighbors(ctx context.Context, graph, id string, dir Direction, typ string, limit int) ([]Edge, error) {
	if err := checkID("id", id); err != nil {
		return nil, err
	}
	if len(typ) > MaxTypeBytes {
		return nil, tooLarge("type", len(typ), MaxTypeBytes)
	}
	if dir < Out || dir > Both {
		return nil, invalid("bad direction %d", dir)
	}
	limit = listLimit(limit, DefaultListLimit, MaxListLimit)
	edges := []Edge{}
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return nil
		}
		var err error
		if dir == Out || dir == Both {
			if edges, err = g.outEdges(edges, id, typ, limit); err != nil {
				return err
			}
		}
		if dir == In || dir == Both {
			prefix := edgePrefix(id, typ)
			c := g.in.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(edges) < limit; k, _ = c.Next() {
				to, t, f, err := decodeEdgeKey(k)
				if err != nil {
					return err
				}
				if dir == Both && f == id {
					continue // a self-loop, already listed as an out edge
				}
				edges = append(edges, Edge{From: f, Type: t, To: to, Props: edgeProps(g.out.Get(edgeKey(f, t, to)))})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return edges, nil
}

// Traverse walks outgoing edges breadth-first from node from, up to depth
// hops (0: from alone; capped at MaxTraverseDepth), following only the
// given edge types unless types is empty, and returns at most limit node
// ids (0 means DefaultTraverse, capped at MaxListLimit) in visiting order,
// from first.
func (s *Store) Traverse(ctx context.Context, graph, from string, depth int, types []string, limit int) ([]string, error) {
	if err := checkID("from", from); err != nil {
		return nil, err
	}
	if depth < 0 {
		return nil, invalid("depth %d is negative", depth)
	}
	depth = min(depth, MaxTraverseDepth)
	for _, t := range types {
		if t == "" {
			return nil, invalid("empty edge type in types")
		}
		if len(t) > MaxTypeBytes {
			return nil, tooLarge("types", len(t), MaxTypeBytes)
		}
	}
	limit = listLimit(limit, DefaultTraverse, MaxListLimit)
	typeSet := map[string]bool{}
	for _, t := range types {
		typeSet[t] = true
	}
	out := []string{from}
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return nil
		}
		seen := map[string]bool{from: true}
		frontier := []string{from}
		for d := 0; d < depth && len(frontier) > 0 && len(out) < limit; d++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			var nextFrontier []string
			for _, id := range frontier {
				prefix := lp(id)
				c := g.out.Cursor()
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					_, t, to, err := decodeEdgeKey(k)
					if err != nil {
						return err
					}
					if len(typeSet) > 0 && !typeSet[t] || seen[to] {
						continue
					}
					seen[to] = true
					out = append(out, to)
					if len(out) == limit {
						return nil
					}
					nextFrontier = append(nextFrontier, to)
				}
			}
			frontier = nextFrontier
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Package rebalance plans and executes moves of graphs between the engine's
// shards so that their loads even out.
//
// Plan is pure and deterministic: the same loads and options always give the
// same moves. It is the greedy algorithm of spec/engine.md §12: repeatedly
// take the hottest and the coldest shard (ties to the lower shard number),
// stop when their gap is within tolerance, else move the one graph of the hot
// shard whose move shrinks the gap most without overshooting
// (minimal |gap − 2·load|, strictly below gap), and stop when no graph
// qualifies or MaxMoves is reached. An indivisible hot graph therefore never
// makes the plan thrash.
//
// LoadsFromPlacements and LoadsFromRoutes build the planner's input from
// per-graph loads (the engine uses each graph's stored bytes); Execute applies
// a plan through a Resharder (the store's online reshard), one move at a time.
package rebalance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// GraphLoad is one graph's load (the engine uses its stored bytes).
type GraphLoad struct {
	Graph string `json:"graph"`
	Load  uint64 `json:"load"`
}

// ShardLoad is one shard and the graphs it holds.
type ShardLoad struct {
	Shard  int         `json:"shard"`
	Graphs []GraphLoad `json:"graphs"`
}

// Move moves Graph from shard From to shard To. Its JSON form is the wire
// move {"graph","from","to"}.
type Move struct {
	Graph string `json:"graph"`
	From  int    `json:"from"`
	To    int    `json:"to"`
}

// Options tunes Plan. The zero value is the default.
type Options struct {
	// Tolerance is the accepted gap between the hottest and the coldest
	// shard, as a fraction of the mean shard load (never less than a load
	// of 1). Zero or negative means 0.10.
	Tolerance float64 `json:"tolerance,omitempty"`
	// MaxMoves caps the plan's length. Zero or negative means 256.
	MaxMoves int `json:"max_moves,omitempty"`
}

// Defaults of Options.
const (
	DefaultTolerance = 0.10
	DefaultMaxMoves  = 256
)

type shardState struct {
	shard  int
	total  uint64
	graphs []GraphLoad
}

func sortGraphs(gs []GraphLoad) {
	slices.SortFunc(gs, func(a, b GraphLoad) int {
		if c := cmp.Compare(b.Load, a.Load); c != 0 {
			return c
		}
		return cmp.Compare(a.Graph, b.Graph)
	})
}

// Plan returns the moves that even out loads, in the order to apply them.
// Fewer than two shards give no moves. loads is not modified.
func Plan(loads []ShardLoad, opts Options) []Move {
	k := len(loads)
	if k < 2 {
		return nil
	}
	tol := opts.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	maxMoves := opts.MaxMoves
	if maxMoves <= 0 {
		maxMoves = DefaultMaxMoves
	}
	st := make([]*shardState, k)
	var total float64
	for i, sl := range loads {
		s := &shardState{shard: sl.Shard, graphs: slices.Clone(sl.Graphs)}
		for _, g := range s.graphs {
			s.total += g.Load
		}
		sortGraphs(s.graphs)
		total += float64(s.total)
		st[i] = s
	}
	mean := total / float64(k)
	tolAbs := max(tol*mean, 1.0)

	var moves []Move
	for len(moves) < maxMoves {
		hot, cold := st[0], st[0]
		for _, s := range st[1:] {
			if s.total > hot.total || (s.total == hot.total && s.shard < hot.shard) {
				hot = s
			}
			if s.total < cold.total || (s.total == cold.total && s.shard < cold.shard) {
				cold = s
			}
		}
		if hot == cold {
			break
		}
		gap := hot.total - cold.total
		if float64(gap) <= tolAbs {
			break
		}
		best := -1
		var bestDiff uint64
		for i, g := range hot.graphs {
			// |gap − 2·load| < gap  ⇔  0 < load < gap.
			if g.Load == 0 || g.Load >= gap {
				continue
			}
			rest := gap - g.Load
			var diff uint64
			if g.Load >= rest {
				diff = g.Load - rest
			} else {
				diff = rest - g.Load
			}
			if best < 0 || diff < bestDiff {
				best, bestDiff = i, diff
			}
		}
		if best < 0 {
			break
		}
		g := hot.graphs[best]
		hot.graphs = slices.Delete(hot.graphs, best, best+1)
		hot.total -= g.Load
		cold.graphs = append(cold.graphs, g)
		sortGraphs(cold.graphs)
		cold.total += g.Load
		moves = append(moves, Move{Graph: g.Graph, From: hot.shard, To: cold.shard})
	}
	return moves
}

// Placement is one graph's load and the shard it lives on.
type Placement struct {
	Graph string `json:"graph"`
	Shard int    `json:"shard"`
	Load  uint64 `json:"load"`
}

func emptyLoads(k int) []ShardLoad {
	k = max(k, 1)
	out := make([]ShardLoad, k)
	for i := range out {
		out[i] = ShardLoad{Shard: i, Graphs: []GraphLoad{}}
	}
	return out
}

// LoadsFromPlacements groups placements by shard (Shard % k) into one
// ShardLoad per shard 0..k-1, empty shards included. k < 1 counts as 1.
func LoadsFromPlacements(ps []Placement, k int) []ShardLoad {
	out := emptyLoads(k)
	k = len(out)
	for _, p := range ps {
		s := ((p.Shard % k) + k) % k
		out[s].Graphs = append(out[s].Graphs, GraphLoad{Graph: p.Graph, Load: p.Load})
	}
	for i := range out {
		sortGraphs(out[i].Graphs)
	}
	return out
}

// Resolver routes a graph to its shard among k; *catalog.Catalog is one
// (its explicit entry, else the hash route).
type Resolver interface {
	ResolveShard(graph string, k int) int
}

// LoadsFromRoutes routes every graph through r and groups the loads into one
// ShardLoad per shard 0..k-1, empty shards included.
func LoadsFromRoutes(loads []GraphLoad, k int, r Resolver) []ShardLoad {
	ps := make([]Placement, len(loads))
	for i, g := range loads {
		ps[i] = Placement{Graph: g.Graph, Shard: r.ResolveShard(g.Graph, max(k, 1)), Load: g.Load}
	}
	return LoadsFromPlacements(ps, k)
}

// Resharder moves one graph to shard, returning the shard it came from and
// the one it is now on; the store's Reshard is one.
type Resharder interface {
	Reshard(ctx context.Context, graph string, shard int) (from, to int, err error)
}

// Execute applies moves in order through r. The source of each move is
// re-resolved by r at the time it runs, so the returned moves (the ones
// applied, with their actual From) may differ from the plan's; a move whose
// graph already is on its target is skipped. It stops at the first error,
// returning the moves applied before it. Cancelling ctx stops it between
// moves (and aborts a move in progress as r allows).
func Execute(ctx context.Context, r Resharder, moves []Move) ([]Move, error) {
	done := []Move{}
	for _, m := range moves {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		from, to, err := r.Reshard(ctx, m.Graph, m.To)
		if err != nil {
			return done, fmt.Errorf("rebalance: move %s to shard %d: %w", m.Graph, m.To, err)
		}
		if from != to {
			done = append(done, Move{Graph: m.Graph, From: from, To: to})
		}
	}
	return done, nil
}

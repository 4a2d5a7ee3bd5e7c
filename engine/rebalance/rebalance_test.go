package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/edictrt/edict/engine/rebalance"
)

func shards(loads ...[]uint64) []rebalance.ShardLoad {
	out := make([]rebalance.ShardLoad, len(loads))
	for i, ls := range loads {
		out[i].Shard = i
		for j, l := range ls {
			out[i].Graphs = append(out[i].Graphs, rebalance.GraphLoad{Graph: fmt.Sprintf("s%dg%d", i, j), Load: l})
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name  string
		loads []rebalance.ShardLoad
		opts  rebalance.Options
		want  []rebalance.Move
	}{
		{"single shard", shards([]uint64{100, 5}), rebalance.Options{}, nil},
		{"balanced", shards([]uint64{10}, []uint64{10}), rebalance.Options{}, nil},
		{"indivisible hot graph", shards([]uint64{100}, nil), rebalance.Options{}, nil},
		// gap 100: |100-2*40|=20 beats |100-2*60|=20? tie → first in order (load desc): 60.
		{"tie goes to the first", shards([]uint64{60, 40}, nil), rebalance.Options{}, []rebalance.Move{{Graph: "s0g0", From: 0, To: 1}}},
		{"skewed", shards([]uint64{50, 30, 20}, []uint64{0}, []uint64{}), rebalance.Options{},
			// 50 fills shard 1 exactly; then 30 and 20 tie for shard 2 (first wins);
			// then the hot shard's only graph (50) is not below the gap 30.
			[]rebalance.Move{{Graph: "s0g0", From: 0, To: 1}, {Graph: "s0g1", From: 0, To: 2}}},
		{"max moves", shards([]uint64{50, 30, 20}, nil, nil), rebalance.Options{MaxMoves: 1},
			[]rebalance.Move{{Graph: "s0g0", From: 0, To: 1}}},
		{"zero loads skipped", shards([]uint64{0, 0, 9}, nil), rebalance.Options{}, []rebalance.Move(nil)},
		{"hot tie to lower shard", shards([]uint64{10, 10}, []uint64{10, 10}, nil), rebalance.Options{},
			[]rebalance.Move{{Graph: "s0g0", From: 0, To: 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rebalance.Plan(c.loads, c.opts)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDivisibleReachesTolerance(t *testing.T) {
	var ls []uint64
	for range 12 {
		ls = append(ls, 25)
	}
	in := shards(ls, nil, nil, nil)
	moves := rebalance.Plan(in, rebalance.Options{})
	totals := apply(in, moves)
	if slices.Max(totals)-slices.Min(totals) > 30 {
		t.Errorf("totals %v after %v", totals, moves)
	}
}

func apply(in []rebalance.ShardLoad, moves []rebalance.Move) []uint64 {
	where := map[string]int{}
	load := map[string]uint64{}
	for _, s := range in {
		for _, g := range s.Graphs {
			where[g.Graph], load[g.Graph] = s.Shard, g.Load
		}
	}
	for _, m := range moves {
		where[m.Graph] = m.To
	}
	totals := make([]uint64, len(in))
	for g, s := range where {
		totals[s] += load[g]
	}
	return totals
}

// TestPlanProperties: the plan is deterministic, never moves a graph from a
// shard it is not on, never widens the hot–cold gap, and respects MaxMoves.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(0, 6).Draw(t, "k")
		in := make([]rebalance.ShardLoad, k)
		n := 0
		for i := range in {
			in[i].Shard = i
			for range rapid.IntRange(0, 6).Draw(t, "graphs") {
				in[i].Graphs = append(in[i].Graphs, rebalance.GraphLoad{Graph: fmt.Sprintf("g%d", n), Load: rapid.Uint64Range(0, 1000).Draw(t, "load")})
				n++
			}
		}
		opts := rebalance.Options{MaxMoves: rapid.IntRange(0, 10).Draw(t, "max")}
		moves := rebalance.Plan(in, opts)
		if !cmp.Equal(moves, rebalance.Plan(in, opts)) {
			t.Fatal("not deterministic")
		}
		limit := opts.MaxMoves
		if limit == 0 {
			limit = rebalance.DefaultMaxMoves
		}
		if len(moves) > limit {
			t.Fatalf("%d moves > %d", len(moves), limit)
		}
		where := map[string]int{}
		for _, s := range in {
			for _, g := range s.Graphs {
				where[g.Graph] = s.Shard
			}
		}
		for _, m := range moves {
			if where[m.Graph] != m.From || m.From == m.To {
				t.Fatalf("bad move %+v", m)
			}
			where[m.Graph] = m.To
		}
		if k >= 2 {
			before, after := apply(in, nil), apply(in, moves)
			if slices.Max(after)-slices.Min(after) > slices.Max(before)-slices.Min(before) {
				t.Fatalf("gap widened: %v → %v", before, after)
			}
		}
	})
}

type route map[string]int

func (r route) ResolveShard(g string, k int) int { return r[g] % k }

func TestLoadBuilders(t *testing.T) {
	got := rebalance.LoadsFromPlacements([]rebalance.Placement{{Graph: "a", Shard: 5, Load: 1}, {Graph: "b", Shard: 0, Load: 2}}, 3)
	want := []rebalance.ShardLoad{
		{Shard: 0, Graphs: []rebalance.GraphLoad{{Graph: "b", Load: 2}}},
		{Shard: 1, Graphs: []rebalance.GraphLoad{}},
		{Shard: 2, Graphs: []rebalance.GraphLoad{{Graph: "a", Load: 1}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	got = rebalance.LoadsFromRoutes([]rebalance.GraphLoad{{Graph: "a", Load: 1}, {Graph: "b", Load: 2}}, 3, route{"a": 2, "b": 3})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

type fakeResharder struct {
	at   map[string]int
	fail string
}

func (f *fakeResharder) Reshard(_ context.Context, g string, to int) (int, int, error) {
	if g == f.fail {
		return 0, 0, errors.New("boom")
	}
	from := f.at[g]
	f.at[g] = to
	return from, to, nil
}

func TestExecute(t *testing.T) {
	r := &fakeResharder{at: map[string]int{"a": 1, "b": 0}, fail: "c"}
	done, err := rebalance.Execute(t.Context(), r, []rebalance.Move{{Graph: "a", From: 0, To: 2}, {Graph: "b", From: 0, To: 0}, {Graph: "c", To: 1}, {Graph: "d", To: 1}})
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff([]rebalance.Move{{Graph: "a", From: 1, To: 2}}, done); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

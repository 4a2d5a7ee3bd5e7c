package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edictrt/edict/engine/rebalance"
	"github.com/edictrt/edict/engine/store"
)

func TestCatalogDurable(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Config{Shards: 4, Catalog: true, InitialMmapSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	node := uint32(7)
	if _, err := open(t, t.TempDir(), store.Config{Shards: 4}).CatalogGet(ctx, "empty"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get without a catalog: %v, want ErrNotFound", err)
	}
	target := (store.ShardIndex("empty", 4) + 1) % 4
	if err := s.CatalogAssign(ctx, "empty", target, &node); err != nil {
		t.Fatal(err)
	}
	must(s.NodePut(ctx, "full", store.Node{ID: "a"}))
	other := (store.ShardIndex("full", 4) + 1) % 4
	if err := s.CatalogAssign(ctx, "full", other, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("assign of a graph with rows elsewhere: %v", err)
	}
	if _, err := s.CatalogGet(ctx, "full"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get absent entry: %v", err)
	}
	s.Close()
	// catalog.db exists, so it is attached without Config.Catalog.
	s = open(t, dir, store.Config{})
	e := must(s.CatalogGet(ctx, "empty"))
	if e.Shard != target || e.Node == nil || *e.Node != 7 || !s.Layout().Catalog {
		t.Errorf("after reopen %+v", e)
	}
	must(s.NodePut(ctx, "empty", store.Node{ID: "x"}))
	if st := must(s.Stats(ctx, "empty")); st.Shard != target {
		t.Errorf("catalog route ignored: shard %d, want %d", st.Shard, target)
	}
}

// TestReshardConcurrent moves a graph while writers hammer it and another
// graph: no write is lost or misrouted.
func TestReshardConcurrent(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := open(t, dir, store.Config{Shards: 4, Catalog: true})
	const moving, other = "moving", "other"
	for i := range 200 {
		must(s.NodePut(ctx, moving, store.Node{ID: fmt.Sprintf("pre-%d", i), Labels: []string{"pre"}}))
	}
	must(0, s.EdgePut(ctx, moving, store.Edge{From: "pre-0", Type: "t", To: "pre-1"}))
	must(0, s.KVPut(ctx, moving, "ns", "k", []byte("v")))
	from := must(s.Stats(ctx, moving)).Shard
	to := (from + 1) % 4
	if store.ShardIndex(other, 4) == to {
		to = (to + 1) % 4
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var acked sync.Map // [graph, id] → true
	var failures atomic.Int64
	for w := range 6 {
		g := moving
		if w%3 == 2 {
			g = other
		}
		wg.Go(func() {
			for i := 0; !stop.Load() || i < 20; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.NodePut(ctx, g, store.Node{ID: id}); err != nil {
					failures.Add(1)
					t.Errorf("write %s/%s: %v", g, id, err)
					return
				}
				acked.Store([2]string{g, id}, true)
			}
		})
	}
	f, tt, err := s.Reshard(ctx, moving, to)
	stop.Store(true)
	wg.Wait()
	if err != nil || f != from || tt != to {
		t.Fatalf("Reshard: %d→%d %v, want %d→%d", f, tt, err, from, to)
	}
	n := 0
	acked.Range(func(k, _ any) bool {
		g, id := k.([2]string)[0], k.([2]string)[1]
		if _, err := s.NodeGet(ctx, g, id); err != nil {
			t.Errorf("acked %s/%s lost: %v", g, id, err)
		}
		n++
		return true
	})
	for i := range 200 {
		if _, err := s.NodeGet(ctx, moving, fmt.Sprintf("pre-%d", i)); err != nil {
			t.Errorf("pre-%d: %v", i, err)
		}
	}
	if _, err := s.EdgeGet(ctx, moving, "pre-0", "t", "pre-1"); err != nil {
		t.Errorf("edge: %v", err)
	}
	if v, err := s.KVGet(ctx, moving, "ns", "k"); err != nil || string(v) != "v" {
		t.Errorf("kv: %q %v", v, err)
	}
	st := must(s.Stats(ctx, moving))
	if st.Shard != to {
		t.Errorf("stats shard %d, want %d", st.Shard, to)
	}
	// The counters moved verbatim and still match the rows.
	all, _, _ := s.NodesByLabel(ctx, moving, "", "", store.MaxListLimit)
	if uint64(len(all)) != st.Nodes {
		t.Errorf("nodes counter %d, rows %d", st.Nodes, len(all))
	}
	t.Logf("%d acked concurrent writes, %d nodes on the moved graph", n, len(all))
	// Nothing of the graph is left on the source.
	if f2, t2, err := s.Reshard(ctx, moving, to); err != nil || f2 != to || t2 != to {
		t.Errorf("re-run: %d→%d %v", f2, t2, err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, store.Config{})
	if st := must(s2.Stats(ctx, moving)); st.Shard != to || st.Nodes != uint64(len(all)) {
		t.Errorf("after reopen %+v", st)
	}
	loads := must(s2.ShardLoads(ctx))
	for _, sl := range loads {
		for _, g := range sl.Graphs {
			if g.Graph == moving && sl.Shard != to {
				t.Errorf("moving still counted on shard %d", sl.Shard)
			}
		}
	}
}

func TestRebalanceExecute(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 2, Catalog: true})
	// Four graphs on one shard, none on the other.
	var gs []string
	for i := 0; len(gs) < 4; i++ {
		g := fmt.Sprintf("t%d", i)
		if store.ShardIndex(g, 2) == 0 {
			gs = append(gs, g)
		}
	}
	for _, g := range gs {
		for j := range 20 {
			must(s.NodePut(ctx, g, store.Node{ID: fmt.Sprint(j)}))
		}
	}
	plan := must(s.RebalancePlan(ctx, rebalance.Options{}))
	if len(plan) == 0 {
		t.Fatal("no plan for a skewed layout")
	}
	done := must(s.RebalanceExecute(ctx, nil))
	if len(done) != len(plan) {
		t.Errorf("executed %v, planned %v", done, plan)
	}
	if again := must(s.RebalancePlan(ctx, rebalance.Options{})); len(again) != 0 {
		t.Errorf("still unbalanced: %v", again)
	}
	for _, g := range gs {
		if st := must(s.Stats(ctx, g)); st.Nodes != 20 {
			t.Errorf("%s: %+v", g, st)
		}
	}
}

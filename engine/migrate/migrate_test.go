package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edictrt/edict/engine/migrate"
	"github.com/edictrt/edict/engine/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct{ graphs, nodes, edges, kv int }

func seed(t *testing.T, dir string, k int) fixture {
	t.Helper()
	ctx := t.Context()
	s, err := store.Open(dir, store.Config{Shards: k, Catalog: true, InitialMmapSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var f fixture
	for g := range 9 {
		name := fmt.Sprintf("tenant-%d", g)
		f.graphs++
		var ops []store.Op
		for i := range 5 {
			ops = append(ops, store.Op{Op: store.OpNodePut, ID: fmt.Sprintf("n%d", i), Labels: []string{name}, Props: []byte(`{"g":"` + name + `"}`)})
			f.nodes++
		}
		ops = append(ops, store.Op{Op: store.OpEdgePut, From: "n0", Type: "t", To: "n1"}, store.Op{Op: store.OpEdgePut, From: "n1", Type: "t", To: "n2"})
		f.edges += 2
		ops = append(ops, store.Op{Op: store.OpKVPut, NS: "ns", Key: "k", Value: []byte(name)})
		f.kv++
		if _, err := s.Batch(ctx, name, ops); err != nil {
			t.Fatal(err)
		}
	}
	// One graph pinned by the catalog to a shard its hash does not pick.
	if err := s.CatalogAssign(ctx, "pinned", 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NodePut(ctx, "pinned", store.Node{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	f.graphs++
	f.nodes++
	return f
}

func verify(t *testing.T, dir string, k int, f fixture) {
	t.Helper()
	ctx := t.Context()
	s, err := store.Open(dir, store.Config{InitialMmapSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Shards() != k {
		t.Fatalf("K=%d, want %d", s.Shards(), k)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	for g := range 9 {
		name := fmt.Sprintf("tenant-%d", g)
		nodes, _, err := s.NodesByLabel(ctx, name, name, "", 0)
		if err != nil || len(nodes) != 5 {
			t.Errorf("%s: %d nodes %v", name, len(nodes), err)
		}
		for _, n := range nodes {
			if string(n.Props) != `{"g":"`+name+`"}` {
				t.Errorf("%s/%s props %s (graphs mixed?)", name, n.ID, n.Props)
			}
		}
		if es, err := s.Neighbors(ctx, name, "n1", store.Both, "", 0); err != nil || len(es) != 2 {
			t.Errorf("%s: edges %v %v", name, es, err)
		}
		if v, err := s.KVGet(ctx, name, "ns", "k"); err != nil || string(v) != name {
			t.Errorf("%s: kv %q %v", name, v, err)
		}
		if st, _ := s.Stats(ctx, name); st.Nodes != 5 || st.Edges != 2 || st.Shard != store.ShardIndex(name, k) {
			t.Errorf("%s: stats %+v", name, st)
		}
	}
	if _, err := s.NodeGet(ctx, "pinned", "p"); err != nil {
		t.Errorf("catalog-routed graph stranded: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	f := seed(t, dir, 1)
	calls := 0
	rep, err := migrate.Run(ctx, migrate.Config{Src: dir, Shards: 4, Progress: func(done, total int) { calls++ },
		Now: func() time.Time { return time.Unix(1700000000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Graphs != f.graphs || rep.Nodes != f.nodes || rep.Edges != f.edges || rep.KV != f.kv || calls == 0 {
		t.Errorf("report %+v, fixture %+v, progress calls %d", rep, f, calls)
	}
	if !strings.HasPrefix(rep.String(), "migration OK: 1 -> 4 shards | graphs=10 nodes=46 edges=18 kv=9") {
		t.Errorf("line %q", rep.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".shard-migrate-backup-1700000000", "graph-0.db")); err != nil {
		t.Errorf("backup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, migrate.TmpDir)); !os.IsNotExist(err) {
		t.Errorf("temp dir left: %v", err)
	}
	verify(t, dir, 4, f)

	// 4 → 2 into a separate destination.
	dest := filepath.Join(t.TempDir(), "engine")
	rep, err = migrate.Run(ctx, migrate.Config{Src: dir, Dest: dest, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Nodes != f.nodes || rep.Backup != "" {
		t.Errorf("report %+v", rep)
	}
	verify(t, dest, 2, f)
	// A destination that now holds shards is refused.
	if _, err := migrate.Run(ctx, migrate.Config{Src: dir, Dest: dest, Shards: 2}); !errors.Is(err, migrate.ErrExists) || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("overwrite: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	if _, err := migrate.Run(ctx, migrate.Config{Src: empty, Shards: 2}); !errors.Is(err, migrate.ErrNoShards) {
		t.Errorf("empty: %v", err)
	}
	mixed := t.TempDir()
	os.WriteFile(filepath.Join(mixed, "graph.db"), nil, 0o600)
	os.WriteFile(filepath.Join(mixed, "graph-0.db"), nil, 0o600)
	if _, err := migrate.Run(ctx, migrate.Config{Src: mixed, Shards: 2}); !errors.Is(err, migrate.ErrMixed) {
		t.Errorf("mixed: %v", err)
	}
	if _, err := migrate.Run(ctx, migrate.Config{Src: mixed, Shards: 65}); !errors.Is(err, migrate.ErrShards) {
		t.Errorf("K=65: %v", err)
	}
}

// TestRetiredLayout: a single graph.db (which the engine refuses) migrates.
func TestRetiredLayout(t *testing.T) {
	dir := t.TempDir()
	f := seed(t, dir, 1)
	if err := os.Rename(filepath.Join(dir, "graph-0.db"), filepath.Join(dir, "graph.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(dir, store.Config{}); !errors.Is(err, store.ErrLayout) {
		t.Fatalf("engine opened the retired layout: %v", err)
	}
	if _, err := migrate.Run(t.Context(), migrate.Config{Src: dir, Shards: 3}); err != nil {
		t.Fatal(err)
	}
	verify(t, dir, 3, f)
}

package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/edictrt/edict/engine/store"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// open opens a store on dir and, at cleanup, checks every file and closes it.
func open(t testing.TB, dir string, cfg store.Config) *store.Store {
	t.Helper()
	if cfg.InitialMmapSize == 0 {
		cfg.InitialMmapSize = 64 << 20
	}
	s, err := store.Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Check(context.Background()); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Check: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// must returns v, panicking (which fails the test with a stack) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestNodes(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 2})
	const g = "g1"
	v := must(s.NodePut(ctx, g, store.Node{ID: "a", Labels: []string{"x", "y", "x"}, Props: json.RawMessage(`{"n": 1}`)}))
	if v != 1 {
		t.Fatalf("version %d, want 1", v)
	}
	n := must(s.NodeGet(ctx, g, "a"))
	if n.Version != 1 || !slices.Equal(n.Labels, []string{"x", "y"}) || string(n.Props) != `{"n":1}` {
		t.Fatalf("got %+v", n)
	}
	v = must(s.NodePut(ctx, g, store.Node{ID: "a", Labels: []string{"y"}}))
	if v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	n = must(s.NodeGet(ctx, g, "a"))
	if string(n.Props) != `{}` || !slices.Equal(n.Labels, []string{"y"}) {
		t.Fatalf("put did not replace: %+v", n)
	}
	created, v, err := s.NodeCreate(ctx, g, store.Node{ID: "a"})
	if err != nil || created || v != 2 {
		t.Fatalf("create existing: %v %d %v", created, v, err)
	}
	created, v, err = s.NodeCreate(ctx, g, store.Node{ID: "b", Labels: []string{"x"}, Props: json.RawMessage(`{"s":"q"}`)})
	if err != nil || !created || v != 1 {
		t.Fatalf("create new: %v %d %v", created, v, err)
	}
	// CAS: condition on a missing field reads as null.
	cases := []struct {
		name    string
		cond    string
		swapped bool
		version uint64
	}{
		{"mismatch", `{"s":"no"}`, false, 1},
		{"match", `{"s":"q","missing":null}`, true, 2},
		{"after set", `{"s":"q","k":[1,2]}`, true, 3},
	}
	for _, c := range cases {
		var cond map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.cond), &cond); err != nil {
			t.Fatal(err)
		}
		sw, v, err := s.NodeCAS(ctx, g, "b", cond, map[string]json.RawMessage{"k": json.RawMessage(`[1, 2]`)})
		if err != nil || sw != c.swapped || v != c.version {
			t.Errorf("%s: swapped=%v version=%d err=%v, want %v %d", c.name, sw, v, err, c.swapped, c.version)
		}
	}
	if n := must(s.NodeGet(ctx, g, "b")); string(n.Props) != `{"k":[1,2],"s":"q"}` {
		t.Errorf("props after cas %s", n.Props)
	}
	if sw, v, err := s.NodeCAS(ctx, g, "zz", nil, nil); sw || v != 0 || err != nil {
		t.Errorf("cas absent: %v %d %v", sw, v, err)
	}
	if _, _, err := s.NodeCAS(ctx, g, "b", map[string]json.RawMessage{"x": json.RawMessage(`{`)}, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad condition: %v", err)
	}
	// Labels and paging.
	for i := range 5 {
		must(s.NodePut(ctx, g, store.Node{ID: fmt.Sprintf("p%d", i), Labels: []string{"page"}}))
	}
	var ids []string
	after := ""
	for {
		nodes, next, err := s.NodesByLabel(ctx, g, "page", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			ids = append(ids, n.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(ids, []string{"p0", "p1", "p2", "p3", "p4"}) {
		t.Errorf("paged %v", ids)
	}
	xs, _, err := s.NodesByLabel(ctx, g, "x", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 || xs[0].ID != "b" {
		t.Errorf("label x: %+v (a lost it)", xs)
	}
	all, next, err := s.NodesByLabel(ctx, g, "", "", 0)
	if err != nil || len(all) != 7 || next != "" {
		t.Errorf("all: %d %q %v", len(all), next, err)
	}
	if d := must(s.NodeDelete(ctx, g, "a")); !d {
		t.Error("delete a: not deleted")
	}
	if d := must(s.NodeDelete(ctx, g, "a")); d {
		t.Error("delete a twice: deleted")
	}
	if _, err := s.NodeGet(ctx, g, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get deleted: %v", err)
	}
	if _, err := s.NodeGet(ctx, "nope", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get in absent graph: %v", err)
	}
	st := must(s.Stats(ctx, g))
	if st.Nodes != 6 || st.Edges != 0 || st.Bytes == 0 || st.Shard != store.ShardIndex(g, 2) {
		t.Errorf("stats %+v", st)
	}
}

func TestEdges(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	const g = "edges"
	put := func(f, ty, to string) {
		t.Helper()
		if err := s.EdgePut(ctx, g, store.Edge{From: f, Type: ty, To: to, Props: json.RawMessage(`{"w":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c", "d", "ab"} {
		must(s.NodePut(ctx, g, store.Node{ID: id}))
	}
	put("a", "knows", "b")
	put("a", "likes", "c")
	put("b", "knows", "c")
	put("c", "knows", "d")
	put("ab", "knows", "a") // "ab" must not match a prefix scan on "a"
	put("a", "self", "a")
	put("a", "knows", "b") // replace
	e := must(s.EdgeGet(ctx, g, "a", "knows", "b"))
	if string(e.Props) != `{"w":1}` {
		t.Errorf("edge %+v", e)
	}
	keys := func(es []store.Edge) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.From+"-"+e.Type+"-"+e.To)
		}
		return out
	}
	cases := []struct {
		dir  store.Direction
		typ  string
		want []string
	}{
		// Index order: type by (length, bytes), then the other end.
		{store.Out, "", []string{"a-self-a", "a-knows-b", "a-likes-c"}},
		{store.Out, "knows", []string{"a-knows-b"}},
		{store.In, "", []string{"a-self-a", "ab-knows-a"}},
		{store.Both, "", []string{"a-self-a", "a-knows-b", "a-likes-c", "ab-knows-a"}},
	}
	for _, c := range cases {
		got := keys(must(s.Neighbors(ctx, g, "a", c.dir, c.typ, 0)))
		if !slices.Equal(got, c.want) {
			t.Errorf("neighbors %v %q: %v, want %v", c.dir, c.typ, got, c.want)
		}
	}
	if got := must(s.Traverse(ctx, g, "a", 2, nil, 0)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("traverse depth 2: %v", got)
	}
	if got := must(s.Traverse(ctx, g, "a", 1, []string{"knows"}, 0)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("traverse knows: %v", got)
	}
	if got := must(s.Traverse(ctx, g, "a", 5, nil, 2)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("traverse limit: %v", got)
	}
	if st := must(s.Stats(ctx, g)); st.Edges != 6 {
		t.Errorf("edges %d, want 6", st.Edges)
	}
	// Deleting a removes its edges in both directions.
	must(s.NodeDelete(ctx, g, "a"))
	if got := must(s.Neighbors(ctx, g, "ab", store.Out, "", 0)); len(got) != 0 {
		t.Errorf("ab still points at a: %v", keys(got))
	}
	if got := must(s.Neighbors(ctx, g, "b", store.In, "", 0)); len(got) != 0 {
		t.Errorf("b still has in edges: %v", keys(got))
	}
	if st := must(s.Stats(ctx, g)); st.Edges != 2 {
		t.Errorf("edges %d, want 2", st.Edges)
	}
	if d := must(s.EdgeDelete(ctx, g, "b", "knows", "c")); !d {
		t.Error("edge delete")
	}
	if _, err := s.EdgeGet(ctx, g, "b", "knows", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted edge: %v", err)
	}
}

func TestKV(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	const g = "kv"
	for _, k := range []string{"a1", "a2", "b1"} {
		if err := s.KVPut(ctx, g, "ns", k, []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.KVPut(ctx, g, "ns2", "a3", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if v := must(s.KVGet(ctx, g, "ns", "a1")); string(v) != "va1" {
		t.Errorf("get %q", v)
	}
	items := must(s.KVScan(ctx, g, "ns", "a", 0))
	if len(items) != 2 || items[0].Key != "a1" || items[1].Key != "a2" {
		t.Errorf("scan %+v", items)
	}
	if items := must(s.KVScan(ctx, g, "ns", "", 1)); len(items) != 1 {
		t.Errorf("scan limit %+v", items)
	}
	cas := []struct {
		name          string
		expected, new []byte
		swapped       bool
	}{
		{"create existing", nil, []byte("x"), false},
		{"wrong expected", []byte("nope"), []byte("x"), false},
		{"swap", []byte("va1"), []byte("x"), true},
		{"delete", []byte("x"), nil, true},
		{"create absent", nil, []byte("y"), true},
	}
	for _, c := range cas {
		if sw := must(s.KVCAS(ctx, g, "ns", "a1", c.expected, c.new)); sw != c.swapped {
			t.Errorf("%s: swapped %v", c.name, sw)
		}
	}
	if v := must(s.KVGet(ctx, g, "ns", "a1")); string(v) != "y" {
		t.Errorf("after cas %q", v)
	}
	if d := must(s.KVDelete(ctx, g, "ns", "a2")); !d {
		t.Error("kv delete")
	}
	if _, err := s.KVGet(ctx, g, "ns", "a2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted: %v", err)
	}
}

func TestLimits(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	big := strings.Repeat("x", store.MaxIDBytes+1)
	bigProps := json.RawMessage(`{"a":"` + strings.Repeat("x", store.MaxPropsBytes) + `"}`)
	cases := []struct {
		name string
		err  error
		code int
		f    func() error
	}{
		{"empty id", store.ErrInvalid, 400, func() error { _, err := s.NodePut(ctx, "g", store.Node{}); return err }},
		{"long id", store.ErrTooLarge, 413, func() error { _, err := s.NodePut(ctx, "g", store.Node{ID: big}); return err }},
		{"big props", store.ErrTooLarge, 413, func() error { _, err := s.NodePut(ctx, "g", store.Node{ID: "a", Props: bigProps}); return err }},
		{"props not object", store.ErrInvalid, 400, func() error {
			_, err := s.NodePut(ctx, "g", store.Node{ID: "a", Props: json.RawMessage(`[1]`)})
			return err
		}},
		{"bad graph", store.ErrInvalid, 400, func() error { _, err := s.NodePut(ctx, "a.b", store.Node{ID: "a"}); return err }},
		{"empty ns", store.ErrInvalid, 400, func() error { return s.KVPut(ctx, "g", "", "k", nil) }},
		{"long ns", store.ErrTooLarge, 413, func() error { return s.KVPut(ctx, "g", strings.Repeat("n", 257), "k", nil) }},
		{"nul key", store.ErrInvalid, 400, func() error { return s.KVPut(ctx, "g", "ns", "a\x00", nil) }},
		{"long key", store.ErrTooLarge, 413, func() error { return s.KVPut(ctx, "g", "ns", strings.Repeat("k", 4097), nil) }},
		{"big value", store.ErrTooLarge, 413, func() error { return s.KVPut(ctx, "g", "ns", "k", make([]byte, store.MaxValueBytes+1)) }},
		{"bad graph type", store.ErrInvalid, 400, func() error { _, err := s.GraphCreate(ctx, "g", "Planet"); return err }},
		{"no catalog", store.ErrNoCatalog, 400, func() error { _, _, err := s.Reshard(ctx, "g", 0); return err }},
	}
	for _, c := range cases {
		err := c.f()
		if !errors.Is(err, c.err) || store.Code(err) != c.code {
			t.Errorf("%s: %v (code %d), want %v (%d)", c.name, err, store.Code(err), c.err, c.code)
		}
	}
	var le *store.LimitError
	if _, err := s.NodePut(ctx, "g", store.Node{ID: big}); !errors.As(err, &le) || le.Field != "id" {
		t.Errorf("LimitError: %v", err)
	}
	if l := must(s.GraphList(ctx)); len(l) != 0 {
		t.Errorf("rejected writes created graphs: %v", l)
	}
}

func TestBatch(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	const g = "b"
	var ops []store.Op
	body := `[{"op":"node_put","id":"a","labels":["l"],"props":{"x":1}},
		{"op":"node_create","id":"a"},
		{"op":"edge_put","from":"a","type":"t","to":"b"},
		{"op":"kv_put","ns":"n","key":"k","value":"aGk="},
		{"op":"node_cas","id":"a","if":{"x":1},"set":{"y":2}},
		{"op":"kv_delete","ns":"n","key":"zz"}]`
	if err := json.Unmarshal([]byte(body), &ops); err != nil {
		t.Fatal(err)
	}
	res := must(s.Batch(ctx, g, ops))
	got, _ := json.Marshal(res)
	want := `[{"version":1},{"created":false,"version":1},{},{},{"swapped":true,"version":2},{"deleted":false}]`
	if string(got) != want {
		t.Errorf("results %s, want %s", got, want)
	}
	if v := must(s.KVGet(ctx, g, "n", "k")); string(v) != "hi" {
		t.Errorf("kv %q", v)
	}
	// An invalid op anywhere rejects the whole batch.
	bad := [][]store.Op{
		{{Op: store.OpNodePut, ID: "c"}, {Op: "node_frobnicate", ID: "d"}},
		{{Op: store.OpNodePut, ID: "c"}, {Op: store.OpKVPut, NS: "n", Key: "k", ID: "x"}},
		{{Op: store.OpNodePut, ID: "c"}, {Op: store.OpEdgePut, From: "a", To: "b"}},
		{{Op: store.OpNodePut, ID: "c"}, {}},
	}
	for i, b := range bad {
		if _, err := s.Batch(ctx, g, b); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("bad batch %d: %v", i, err)
		}
	}
	// A failure while running (merged props over the limit) rolls back
	// the ops before it.
	huge := json.RawMessage(`"` + strings.Repeat("z", store.MaxPropsBytes-100) + `"`)
	_, err := s.Batch(ctx, g, []store.Op{
		{Op: store.OpNodePut, ID: "c"},
		{Op: store.OpNodePut, ID: "big", Props: json.RawMessage(`{"a":` + string(huge) + `}`)},
		{Op: store.OpNodeCAS, ID: "big", Set: map[string]json.RawMessage{"b": huge}},
	})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("overflowing batch: %v", err)
	}
	if _, err := s.NodeGet(ctx, g, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rejected batch wrote c: %v", err)
	}
}

// TestGroupIsolation: an op that fails inside the writer fails alone; the
// ops committed with it in the same group succeed.
func TestGroupIsolation(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	const g = "iso"
	huge := json.RawMessage(`"` + strings.Repeat("z", store.MaxPropsBytes-100) + `"`)
	must(s.NodePut(ctx, g, store.Node{ID: "big", Props: json.RawMessage(`{"a":` + string(huge) + `}`)}))
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() {
			if i%8 == 0 {
				_, _, errs[i] = s.NodeCAS(ctx, g, "big", nil, map[string]json.RawMessage{"b": huge})
				return
			}
			_, errs[i] = s.NodePut(ctx, g, store.Node{ID: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%8 == 0 {
			if !errors.Is(err, store.ErrTooLarge) {
				t.Errorf("cas %d: %v", i, err)
			}
		} else if err != nil {
			t.Errorf("put %d failed with another op's error: %v", i, err)
		}
	}
	if st := must(s.Stats(ctx, g)); st.Nodes != 57 {
		t.Errorf("nodes %d, want 57", st.Nodes)
	}
}

func TestGraphs(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir(), store.Config{Shards: 4})
	if c := must(s.GraphCreate(ctx, "team1", store.GraphTeam)); !c {
		t.Error("not created")
	}
	if c := must(s.GraphCreate(ctx, "team1", store.GraphBus)); c {
		t.Error("created twice")
	}
	if typ := must(s.GraphType(ctx, "team1")); typ != store.GraphTeam {
		t.Errorf("type %s", typ)
	}
	must(s.NodePut(ctx, "implicit", store.Node{ID: "a"}))
	if typ := must(s.GraphType(ctx, "implicit")); typ != store.GraphGlobal {
		t.Errorf("backfilled type %s", typ)
	}
	if l := must(s.GraphList(ctx)); !slices.Equal(l, []string{"implicit", "team1"}) {
		t.Errorf("list %v", l)
	}
	if err := s.GraphClear(ctx, "implicit"); err != nil {
		t.Fatal(err)
	}
	if st := must(s.Stats(ctx, "implicit")); st.Nodes != 0 || st.Bytes != 0 {
		t.Errorf("cleared stats %+v", st)
	}
	if d := must(s.GraphDelete(ctx, "implicit")); !d {
		t.Error("not deleted")
	}
	if d := must(s.GraphDelete(ctx, "implicit")); d {
		t.Error("deleted twice")
	}
	if l := must(s.GraphList(ctx)); !slices.Equal(l, []string{"team1"}) {
		t.Errorf("list %v", l)
	}
	lay := s.Layout()
	if lay.Shards != 4 || len(lay.Files) != 4 || lay.Files[3] != "graph-3.db" || lay.Catalog {
		t.Errorf("layout %+v", lay)
	}
}

func TestClosed(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.Config{Shards: 1, InitialMmapSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.NodePut(t.Context(), "g", store.Node{ID: "a"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("put after close: %v", err)
	}
	if _, err := s.NodeGet(t.Context(), "g", "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("get after close: %v", err)
	}
}

func TestLayoutRefusals(t *testing.T) {
	cases := []struct {
		name  string
		files []string
		dirs  []string
		want  string
	}{
		{"retired", []string{"graph.db"}, nil, "retired shard layout detected (graph.db)"},
		{"non-canonical", []string{"graph-0.db", "graph-01.db"}, nil, "non-canonical"},
		{"invalid", []string{"graph-x.db"}, nil, "invalid"},
		{"non-contiguous", []string{"graph-0.db", "graph-2.db"}, nil, "non-contiguous"},
		{"not from zero", []string{"graph-1.db"}, nil, "non-contiguous"},
		{"not regular", nil, []string{"graph-0.db"}, "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range c.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range c.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			s, err := store.Open(dir, store.Config{})
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, store.ErrLayout) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "edict migrate-shards") {
				t.Errorf("error %q: want ErrLayout naming %q and the fix", err, c.want)
			}
		})
	}
	// A foreign file with a canonical name is refused by bbolt.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "graph-0.db"), []byte(strings.Repeat("not a database", 1000)), 0o600)
	if s, err := store.Open(dir, store.Config{}); err == nil {
		s.Close()
		t.Error("opened a foreign file")
	}
}

func TestOnDiskKWins(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Config{Shards: 3, InitialMmapSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, store.Config{Shards: 8})
	if s.Shards() != 3 {
		t.Errorf("K=%d, want the on-disk 3", s.Shards())
	}
}

func fnvRoute(name string, k int) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(k))
}

// TestHashRouting: every graph lands in graph-<FNV-1a(name) % K>.db.
func TestHashRouting(t *testing.T) {
	names := []string{"__commons__", "agent-42", "team_7", "a", "Z9", "tenant-0001", "x-y-z", "bus"}
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprint("K=", k), func(t *testing.T) {
			dir := t.TempDir()
			s, err := store.Open(dir, store.Config{Shards: k, InitialMmapSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range names {
				if k > 1 && store.ShardIndex(g, k) != fnvRoute(g, k) {
					t.Errorf("ShardIndex(%s,%d)=%d, FNV-1a says %d", g, k, store.ShardIndex(g, k), fnvRoute(g, k))
				}
				if _, err := s.NodePut(t.Context(), g, store.Node{ID: "n"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range k {
				db, err := bbolt.Open(filepath.Join(dir, store.ShardFile(i)), 0o600, &bbolt.Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				db.View(func(tx *bbolt.Tx) error {
					return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
						if want := store.ShardIndex(string(name), k); want != i {
							t.Errorf("graph %s in shard %d, routes to %d", name, i, want)
						}
						return nil
					})
				})
				if err := store.CheckDB(db); err != nil {
					t.Error(err)
				}
				db.Close()
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"agent:42", "agent_42"},
		{"héllo", "h_llo"},
		{"a.b-c_d", "a.b-c_d"},
		{"日本", "__"},
		{"\xff\xfe", "__"},
		{"", ""},
	}
	for _, c := range cases {
		if got := store.Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q)=%q, want %q", c.in, got, c.want)
		}
	}
	if store.ShardIndex("anything", 1) != 0 || store.ShardIndex("anything", 0) != 0 {
		t.Error("K<=1 must route to 0")
	}
	if store.ShardIndex("agent:42", 8) != store.ShardIndex("agent_42", 8) {
		t.Error("route not over the sanitized name")
	}
}

func TestBackPressure(t *testing.T) {
	// A cancelled ctx stops a caller that waits for queue space; the write
	// is never half-done.
	s := open(t, t.TempDir(), store.Config{Shards: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.NodePut(ctx, "g", store.Node{ID: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled put: %v", err)
	}
}

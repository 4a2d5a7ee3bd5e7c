package admission_test

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/edictrt/edict/engine/admission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The seed's first proof test: with the global pool drained by writers, a
// write sheds while a read gets the reserved lane.
func TestReadIsAdmittedWhenWritePoolIsSaturated(t *testing.T) {
	global, graphs, read := admission.NewPool(4), admission.NewGraphs(4), admission.NewPool(2)
	for i := range 4 {
		if _, ok := admission.Admit(global, graphs, read, "__commons__", true); !ok {
			t.Fatalf("writer %d not admitted while the pool had room", i)
		}
	}
	if _, ok := admission.Admit(global, graphs, read, "__commons__", true); ok {
		t.Fatal("write admitted with the global pool drained")
	}
	g, ok := admission.Admit(global, graphs, read, "__commons__", false)
	if !ok {
		t.Fatal("read shed with the global pool drained by writers")
	}
	if g.Global != nil || g.PerGraph != nil || g.Read == nil || g.Outcome() != admission.ReadLane {
		t.Fatalf("read grant = %+v, want the read lane only", g)
	}
}

// The seed's second proof test: the lane is bounded under a read flood and
// admits again once a slot frees.
func TestReadLaneIsBoundedUnderAReadFlood(t *testing.T) {
	global, graphs, read := admission.NewPool(1), admission.NewGraphs(1), admission.NewPool(2)
	if _, ok := admission.Admit(global, graphs, read, "g", true); !ok {
		t.Fatal("writer not admitted")
	}
	var held []admission.Grant
	for range 2 {
		g, ok := admission.Admit(global, graphs, read, "g", false)
		if !ok || g.Outcome() != admission.ReadLane {
			t.Fatalf("read = %v %v, want the read lane", g.Outcome(), ok)
		}
		held = append(held, g)
	}
	if g, ok := admission.Admit(global, graphs, read, "g", false); ok {
		t.Fatalf("read admitted (%v) with the lane full", g.Outcome())
	}
	held[0].Release()
	held[0].Release() // a second release is a no-op
	if read.Held() != 1 {
		t.Fatalf("lane holds %d after one release, want 1", read.Held())
	}
	if g, ok := admission.Admit(global, graphs, read, "g", false); !ok || g.Outcome() != admission.ReadLane {
		t.Fatal("read not admitted after a lane slot freed")
	}
}

// The seed's third proof test: 200 concurrent reads on a hot graph whose
// pool and per-graph cap are held by writers are all admitted.
func TestReadsSurviveUnderMaxWriteLoadOnHotGraph(t *testing.T) {
	const readers = 200
	global, graphs, read := admission.NewPool(16), admission.NewGraphs(4), admission.NewPool(readers)
	for range 4 {
		if _, ok := admission.Admit(global, graphs, read, "__commons__", true); !ok {
			t.Fatal("writer not admitted")
		}
	}
	// Writers on other graphs take the rest of the global pool.
	for i := range 12 {
		if _, ok := admission.Admit(global, graphs, read, "other"+string(rune('a'+i/4)), true); !ok {
			t.Fatalf("writer %d on another graph not admitted", i)
		}
	}
	if _, ok := admission.Admit(global, graphs, read, "__commons__", true); ok {
		t.Fatal("a write was admitted past the saturated pools")
	}
	var wg sync.WaitGroup
	shed := make(chan int, readers)
	for i := range readers {
		wg.Go(func() {
			if _, ok := admission.Admit(global, graphs, read, "__commons__", false); !ok {
				shed <- i
			}
		})
	}
	wg.Wait()
	close(shed)
	if n := len(shed); n != 0 {
		t.Fatalf("%d of %d reads shed under write load", n, readers)
	}
}

func TestPerGraphLossReturnsGlobalPermit(t *testing.T) {
	global, graphs, read := admission.NewPool(8), admission.NewGraphs(1), admission.NewPool(1)
	first, _ := admission.Admit(global, graphs, read, "hot", true)
	if _, ok := admission.Admit(global, graphs, read, "hot", true); ok {
		t.Fatal("second write on a graph with per_graph 1 was admitted")
	}
	if global.Held() != 1 {
		t.Fatalf("global holds %d, want 1: a lost per-graph permit must give the global one back", global.Held())
	}
	g, ok := admission.Admit(global, graphs, read, "hot", false)
	if !ok || g.Outcome() != admission.ReadLane {
		t.Fatal("read on a capped graph did not bypass the cap through the read lane")
	}
	first.Release()
	g.Release()
	if global.Held() != 0 || read.Held() != 0 || graphs.Len() != 0 {
		t.Fatalf("after release: global %d read %d graphs %d, want all 0", global.Held(), read.Held(), graphs.Len())
	}
}

func TestZeroGrantReleaseIsNoop(t *testing.T) {
	var g admission.Grant
	g.Release()
	if g.Outcome() != admission.Busy {
		t.Fatalf("zero grant outcome = %v, want busy", g.Outcome())
	}
}

// Property: whatever sequence of admits and releases runs, no pool is ever
// over its size, grants are mutually exclusive, writes never hold the read
// lane, and idle graphs leave no entries.
func TestAdmitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 8).Draw(t, "size")
		pg := rapid.IntRange(1, size).Draw(t, "per_graph")
		rr := rapid.IntRange(1, 4).Draw(t, "read")
		global, graphs, read := admission.NewPool(size), admission.NewGraphs(pg), admission.NewPool(rr)
		type held struct {
			g     admission.Grant
			write bool
		}
		var live []held
		for range rapid.IntRange(1, 100).Draw(t, "steps") {
			if len(live) > 0 && rapid.Bool().Draw(t, "release") {
				i := rapid.IntRange(0, len(live)-1).Draw(t, "which")
				live[i].g.Release()
				live = append(live[:i], live[i+1:]...)
			} else {
				graph := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "graph")
				w := rapid.Bool().Draw(t, "write")
				g, ok := admission.Admit(global, graphs, read, graph, w)
				if ok {
					if (g.Read != nil) == (g.Global != nil) || (g.Global != nil) != (g.PerGraph != nil) {
						t.Fatalf("grant not exclusive: %+v", g)
					}
					if w && g.Read != nil {
						t.Fatal("a write got the read lane")
					}
					live = append(live, held{g, w})
				} else if !w && read.Available() > 0 {
					t.Fatal("a read was shed while the read lane had room")
				}
			}
			if global.Held() > size || read.Held() > rr {
				t.Fatalf("over capacity: global %d/%d read %d/%d", global.Held(), size, read.Held(), rr)
			}
			for _, gr := range []string{"a", "b", "c"} {
				if graphs.Held(gr) > pg {
					t.Fatalf("graph %s holds %d > %d", gr, graphs.Held(gr), pg)
				}
			}
		}
		for _, h := range live {
			h.g.Release()
		}
		if global.Held() != 0 || read.Held() != 0 || graphs.Len() != 0 {
			t.Fatal("permits leaked after releasing everything")
		}
	})
}

func TestGate(t *testing.T) {
	g := admission.NewGate(admission.Config{MaxInFlight: 2, PerGraph: 1, ReadReserved: 1})
	w, ok := g.Admit("$work", true)
	if !ok || g.GlobalAvailable() != 1 || g.Graphs() != 1 {
		t.Fatalf("gate admit: ok=%v available=%d graphs=%d", ok, g.GlobalAvailable(), g.Graphs())
	}
	w.Release()
	if g.GlobalAvailable() != 2 || g.Graphs() != 0 || g.Sizes().ReadReserved != 1 {
		t.Fatal("gate did not return to idle")
	}
}

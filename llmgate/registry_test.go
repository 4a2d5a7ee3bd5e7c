package llmgate

import (
	"testing"
	"testing/synctest"
)

func TestRegistryKeys(t *testing.T) {
	r := NewRegistry(Config{Reserve: NoReserve})
	a := r.Gate("  Qwen3-32B ", 4)
	if b := r.Gate("qwen3-32b", 4); b != a {
		t.Fatal("the same model, spelt differently, got two gates")
	}
	if r.Gate("", 4) != r.Gate(DefaultModel, 4) || r.Gate(" ", 4) != r.Gate("", 4) {
		t.Fatal("empty model is not the default key")
	}
	if r.Gate("embedding", 4) == a {
		t.Fatal("embedding and generator models share a gate")
	}
	if a.model != "qwen3-32b" || a.Reserve() != 0 {
		t.Fatalf("gate model %q reserve %d", a.model, a.Reserve())
	}
	if NewRegistry(Config{}).Gate("qwen3-32b", 4) == a {
		t.Fatal("two registries share a gate")
	}
	var zero Registry
	if g := zero.Gate("m", 0); g.Capacity() != 1 {
		t.Fatalf("zero Registry: capacity %d", g.Capacity())
	}
}

// A new capacity for a known model resizes its gate in place: the calls in
// flight stay counted, so the server is never oversubscribed.
func TestRegistryResizesInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry(Config{})
		g := r.Gate("m", 8)
		if n := fill(g, inte); n != 8 {
			t.Fatalf("filled %d", n)
		}
		g2 := r.Gate("M", 4)
		if g2 != g {
			t.Fatal("a capacity change built a second gate")
		}
		if s := g.Stats(); s.Capacity != 4 || s.Reserve != 1 || s.InFlight != 8 {
			t.Fatalf("after shrink: %+v", s)
		}
		w := start(g, inte)
		synctest.Wait()
		releaseN(g, 4) // 4 in flight of 4: still full
		synctest.Wait()
		if w.admitted() {
			t.Fatal("admitted above the shrunk capacity")
		}
		g.Release()
		synctest.Wait()
		if !w.admitted() {
			t.Fatal("not admitted once below the new capacity")
		}
		r.Gate("m", 16) // grow: reserve re-derived
		if s := g.Stats(); s.Capacity != 16 || s.Reserve != 5 || s.InFlight != 4 {
			t.Fatalf("after grow: %+v", s)
		}
		releaseN(g, 4)
	})
}

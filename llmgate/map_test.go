package llmgate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edictrt/edict/priority"
)

func TestMapOrderAndWidth(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		n        int
	}{
		{"empty", 4, 0},
		{"single item", 4, 1},
		{"inline at capacity 1", 1, 5},
		{"wider than items", 16, 5},
		{"narrower than items", 3, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGate(t, Config{Capacity: tt.capacity})
				items := make([]int, tt.n)
				for i := range items {
					items[i] = i
				}
				var mu sync.Mutex
				running, peak := 0, 0
				got, err := Map(with(bgc), g, items, func(ctx context.Context, i int) (string, error) {
					if c := priority.From(ctx); c != bgc {
						return "", fmt.Errorf("item %d ran as %v", i, c)
					}
					mu.Lock()
					running++
					peak = max(peak, running)
					mu.Unlock()
					time.Sleep(time.Duration(tt.n-i) * time.Millisecond) // later items finish first
					mu.Lock()
					running--
					mu.Unlock()
					return fmt.Sprint(i), nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.n {
					t.Fatalf("len = %d, want %d", len(got), tt.n)
				}
				for i, s := range got {
					if s != fmt.Sprint(i) {
						t.Fatalf("result %d = %q: order lost", i, s)
					}
				}
				// Background is held to its ceiling by the gate, the call
				// to the capacity by Map.
				ceiling := tt.capacity - g.Reserve()
				if tt.n > 0 && (peak > min(tt.capacity, tt.n) || peak > ceiling) {
					t.Fatalf("peak concurrency %d: capacity %d ceiling %d", peak, tt.capacity, ceiling)
				}
				if tt.n >= ceiling && tt.capacity > 1 && peak != ceiling {
					t.Fatalf("peak concurrency %d, want the ceiling %d", peak, ceiling)
				}
				if s := g.Stats(); s.InFlight != 0 || s.Admitted.Of(bgc) != int64(tt.n) {
					t.Fatalf("stats after Map: %+v", s)
				}
			})
		})
	}
}

func TestMapFirstErrorCancelsRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, Config{Capacity: 4})
		boom := errors.New("boom")
		var mu sync.Mutex
		started := 0
		all := make(chan struct{}) // closed when the width has started
		_, err := Map(context.Background(), g, make([]int, 100), func(ctx context.Context, _ int) (int, error) {
			mu.Lock()
			started++
			n := started
			mu.Unlock()
			if n == 4 {
				close(all)
			}
			if n == 3 {
				<-all
				return 0, boom
			}
			<-ctx.Done() // the others run until cancelled
			return 0, ctx.Err()
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Map = %v, want boom", err)
		}
		if started != 4 {
			t.Fatalf("%d items started, want 4 (the width)", started)
		}
		if s := g.Stats(); s.InFlight != 0 || s.Admitted.Of(orch) != 4 {
			t.Fatalf("stats: %+v (untagged Map runs as orchestration)", s)
		}
	})
}

func TestMapDoneContext(t *testing.T) {
	g := newGate(t, Config{Capacity: 4})
	for _, n := range []int{1, 10} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		_, err := Map(ctx, g, make([]int, n), func(context.Context, int) (int, error) {
			called = true
			return 0, nil
		})
		if !errors.Is(err, context.Canceled) || called {
			t.Fatalf("%d items: Map = %v, fn called %v", n, err, called)
		}
	}
}

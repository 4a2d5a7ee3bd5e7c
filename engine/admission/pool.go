package admission

import (
	"sync"
	"sync/atomic"
)

// Pool is a counting semaphore with non-blocking acquisition only.
type Pool struct {
	size int64
	held atomic.Int64
}

// NewPool returns a pool of size permits (a size below 0 counts as 0).
func NewPool(size int) *Pool { return &Pool{size: int64(max(size, 0))} }

// TryAcquire takes a permit if one is free and reports whether it did.
func (p *Pool) TryAcquire() bool {
	for {
		n := p.held.Load()
		if n >= p.size {
			return false
		}
		if p.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release returns a permit taken with TryAcquire.
func (p *Pool) Release() {
	if p.held.Add(-1) < 0 {
		panic("admission: pool released more permits than were acquired")
	}
}

// Size returns the number of permits.
func (p *Pool) Size() int { return int(p.size) }

// Held returns the number of permits taken.
func (p *Pool) Held() int { return int(p.held.Load()) }

// Available returns the number of free permits.
func (p *Pool) Available() int { return int(p.size - p.held.Load()) }

// Graphs holds the per-graph pools: limit permits for each graph, keyed by
// graph name. An entry exists exactly while its graph holds a permit, so the
// map never grows beyond the graphs in flight and there is never more than
// one live pool for a graph.
type Graphs struct {
	limit int
	mu    sync.Mutex
	held  map[string]int
}

// NewGraphs returns per-graph pools of limit permits each.
func NewGraphs(limit int) *Graphs { return &Graphs{limit: max(limit, 0), held: map[string]int{}} }

// TryAcquire takes one of graph's permits if one is free.
func (g *Graphs) TryAcquire(graph string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[graph] >= g.limit {
		return false
	}
	g.held[graph]++
	return true
}

// Release returns one of graph's permits; the graph's entry goes when it
// holds none.
func (g *Graphs) Release(graph string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.held[graph] - 1
	switch {
	case n < 0:
		panic("admission: graph pool released more permits than were acquired")
	case n == 0:
		delete(g.held, graph)
	default:
		g.held[graph] = n
	}
}

// Held returns the permits graph holds.
func (g *Graphs) Held(graph string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[graph]
}

// Len returns the number of graphs holding a permit.
func (g *Graphs) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// Limit returns the permits per graph.
func (g *Graphs) Limit() int { return g.limit }

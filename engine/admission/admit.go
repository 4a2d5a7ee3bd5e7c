package admission

import "sync"

// Outcome names how a request was admitted; the values are the span
// attribute edict.admission.
type Outcome string

// Admission outcomes of the baseline gate.
const (
	Granted  Outcome = "granted"   // normal path: global and per-graph permits
	ReadLane Outcome = "read_lane" // the reserved read lane
	Busy     Outcome = "busy"      // shed
)

// Grant is what [Admit] granted: either a global and a per-graph permit, or
// a read-lane permit, never both. The zero Grant holds nothing.
type Grant struct {
	// Global is the global pool whose permit is held, or nil.
	Global *Pool
	// PerGraph is the per-graph pools whose permit for Graph is held, or nil.
	PerGraph *Graphs
	// Graph is the graph key of the per-graph permit.
	Graph string
	// Read is the reserved read lane whose permit is held, or nil.
	Read *Pool

	once *sync.Once
}

// Outcome reports which path granted g.
func (g Grant) Outcome() Outcome {
	switch {
	case g.Read != nil:
		return ReadLane
	case g.Global != nil:
		return Granted
	}
	return Busy
}

// Release returns the permits in the order read, per-graph, global. Only
// the first Release of a grant (or of any copy of it) has an effect.
func (g Grant) Release() {
	if g.once == nil {
		return
	}
	g.once.Do(func() {
		if g.Read != nil {
			g.Read.Release()
		}
		if g.PerGraph != nil {
			g.PerGraph.Release(g.Graph)
		}
		if g.Global != nil {
			g.Global.Release()
		}
	})
}

// Admit is the baseline admission decision. It tries a global permit, then
// graph's per-graph permit (giving the global one back if that fails); on
// that path both are granted. Otherwise a write is shed, and a read tries
// the reserved read lane, which bypasses the per-graph cap. It never waits;
// ok is false when the request is shed.
func Admit(global *Pool, perGraph *Graphs, read *Pool, graph string, isWrite bool) (g Grant, ok bool) {
	if global.TryAcquire() {
		if perGraph.TryAcquire(graph) {
			return Grant{Global: global, PerGraph: perGraph, Graph: graph, once: new(sync.Once)}, true
		}
		global.Release()
	}
	if isWrite {
		return Grant{}, false
	}
	if read.TryAcquire() {
		return Grant{Read: read, once: new(sync.Once)}, true
	}
	return Grant{}, false
}

// Gate is the baseline gate: the three pools sized by a [Config].
type Gate struct {
	cfg    Config
	global *Pool
	graphs *Graphs
	read   *Pool
}

// NewGate returns a gate with cfg's effective sizes.
func NewGate(cfg Config) *Gate {
	cfg = cfg.Effective()
	return &Gate{
		cfg:    cfg,
		global: NewPool(cfg.MaxInFlight),
		graphs: NewGraphs(cfg.PerGraph),
		read:   NewPool(cfg.ReadReserved),
	}
}

// Admit runs [Admit] over the gate's pools.
func (g *Gate) Admit(graph string, isWrite bool) (Grant, bool) {
	return Admit(g.global, g.graphs, g.read, graph, isWrite)
}

// Sizes returns the effective sizes.
func (g *Gate) Sizes() Config { return g.cfg }

// GlobalAvailable returns the free permits of the global pool.
func (g *Gate) GlobalAvailable() int { return g.global.Available() }

// ReadAvailable returns the free permits of the reserved read lane.
func (g *Gate) ReadAvailable() int { return g.read.Available() }

// Graphs returns the number of graphs currently holding a per-graph permit.
func (g *Gate) Graphs() int { return g.graphs.Len() }

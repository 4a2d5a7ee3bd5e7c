package llmgate

import "sync"

// Registry holds one [Gate] per model, so that every caller of a model
// shares its capacity. Model names are keyed trimmed and in lower case; the
// empty name is [DefaultModel]. An embedding model and a generator model
// are different keys and never contend. Gates are never evicted. The zero
// value is a registry of gates with the zero [Config]; a Registry is safe
// for concurrent use and must not be copied after first use.
type Registry struct {
	cfg   Config
	mu    sync.Mutex
	gates map[string]*Gate
}

// NewRegistry returns a registry whose gates are built from cfg, with
// cfg.Capacity and cfg.Model replaced by the arguments of [Registry.Gate].
// Every registry is independent of every other.
func NewRegistry(cfg Config) *Registry {
	return &Registry{cfg: cfg}
}

// Gate returns the gate of model, built with the given capacity (floored at
// 1) on first use. When the gate exists with another capacity it is resized
// in place: its reserve is re-derived from the settings read when it was
// built, calls in flight stay counted, and after a shrink below the number
// in flight nobody is admitted until enough have been released. A second
// gate for the same model, which would let the server be oversubscribed, is
// never built.
func (r *Registry) Gate(model string, capacity int) *Gate {
	key := modelKey(model)
	r.mu.Lock()
	g, ok := r.gates[key]
	if !ok {
		g = r.build(key, capacity)
		if r.gates == nil {
			r.gates = make(map[string]*Gate)
		}
		r.gates[key] = g
	}
	r.mu.Unlock()
	if ok {
		g.resize(capacity)
	}
	return g
}

// build makes a new gate; a meter provider that refuses the instruments
// costs the gate its metrics, not its admission.
func (r *Registry) build(key string, capacity int) *Gate {
	cfg := r.cfg
	cfg.Capacity, cfg.Model = capacity, key
	g, err := New(cfg)
	if err != nil {
		cfg.MeterProvider = nil
		g, _ = New(cfg) // cannot fail without a meter provider
	}
	return g
}

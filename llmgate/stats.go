package llmgate

import "github.com/edictrt/edict/priority"

// PerClass holds one figure per priority class, indexed by
// [priority.Class.Order]: Interactive, Orchestration, Hydration,
// BackgroundIngestion.
type PerClass [4]int64

// Of returns the figure for class c; an invalid class reads as
// Orchestration, as [priority.Class.Order] does.
func (p PerClass) Of(c priority.Class) int64 { return p[c.Order()] }

// Total returns the sum over all classes.
func (p PerClass) Total() int64 { return p[0] + p[1] + p[2] + p[3] }

// High returns the sum over the high classes (all but BackgroundIngestion).
func (p PerClass) High() int64 { return p[0] + p[1] + p[2] }

// Stats is a snapshot of a [Gate]. InFlight is one total because
// [Gate.Release] carries no class; the per-class figures are calls waiting
// now, and calls admitted and cancelled since the gate was built.
type Stats struct {
	// Capacity and Reserve are the gate's current size.
	Capacity, Reserve int
	// InFlight is the number of slots held, by every class together.
	InFlight int
	// Waiting counts the callers parked in Acquire now.
	Waiting PerClass
	// Admitted counts the acquisitions that succeeded, at once or after a
	// wait.
	Admitted PerClass
	// Cancelled counts the Acquire calls that returned the context's error.
	Cancelled PerClass
}

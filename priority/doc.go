// Package priority is the one vocabulary of priority classes that every
// contended resource in edict keys off: the LLM gate, the worker pool, the
// work-item queue and the graph engine.
//
// # Classes
//
// There are four classes. Lower rank means sooner; Orchestration and
// Hydration share rank 1 and Order breaks the tie where one class must be
// chosen over another (claims, clamping, QoS):
//
//	class                wire name              rank  high
//	Interactive          interactive            0     yes
//	Orchestration        orchestration          1     yes
//	Hydration            hydration              1     yes
//	BackgroundIngestion  background_ingestion   3     no
//
// Only explicitly background work ever yields: a context that carries no
// class resolves to Orchestration, which is high.
//
// # Carrying a class
//
// A class travels in a [context.Context]. [With] opens a scope, [From] reads
// the class (Orchestration when untagged) and [Lookup] says whether one was
// set. Scopes nest: the outer context keeps its class.
//
//	ctx = priority.With(ctx, priority.Interactive)
//	_ = priority.From(ctx) // Interactive
//
// # Propagation
//
// Across processes the class travels as the header [Header]
// (X-Resource-Priority) carrying the wire name, and as the W3C baggage member
// edict.priority. [Propagator] is an OpenTelemetry
// propagation.TextMapPropagator; it must come after propagation.Baggage in a
// composite, because Baggage's Inject replaces the whole baggage header:
//
//	prop := propagation.NewCompositeTextMapPropagator(
//		propagation.TraceContext{}, propagation.Baggage{}, priority.Propagator{})
//
// For HTTP use propagation.HeaderCarrier. For NATS use [Carrier] over a
// nats.Header (a map[string][]string): NATS header names are case-sensitive
// on the wire and HeaderCarrier canonicalizes names, so it would miss the
// lower-case traceparent other clients send. Extract never fails: a missing,
// unknown or oversized (more than 64 bytes) value leaves the context's class
// as it was. A class read from the wire is untrusted; the engine clamps it to
// the ceiling of the authenticated principal.
//
// # Lanes
//
// Task types map to lanes and lanes to classes ([LaneOf], [ForLane],
// [ForTaskType]); [Lanes] lists the lane table with each lane's model role,
// pool and soft timeout. Only the queries lane is Interactive; the hydration
// task types skill_workflows and capability_hydration are Hydration (high)
// even though they are bulky.
//
// Everything in this package is safe for concurrent use and allocation-free
// on the hot paths ([From], [Class.String], [Parse] of a canonical name).
package priority

// Package admission decides, without queueing, whether the graph engine
// takes a request now or sheds it with BUSY.
//
// # Why a reserved read lane
//
// The engine's default graph is an ingestion firehose. Reads are cheap: they
// run on MVCC snapshots and never wait on a writer. Yet a single shared
// admission pool couples them to writes: once ingestion fills it, an
// interactive read would be shed exactly like a write. The baseline gate
// therefore has three counting pools:
//
//   - the global pool (max_in_flight), shared by everyone;
//   - a per-graph pool (per_graph permits for each graph, created lazily and
//     dropped when idle) so that one hot graph cannot take the whole box;
//   - the reserved read lane (read_reserved), which writes can never hold and
//     which bypasses the per-graph cap.
//
// [Admit] is the pure core: everybody tries the normal path (global, then
// per-graph; a lost per-graph permit gives the global one back); a write
// that loses it is shed; a read falls back to the reserved lane; a full lane
// sheds the read. The three grants are mutually exclusive and nothing ever
// waits. Under any amount of write load an interactive read keeps a lane;
// only a genuine read flood that also fills the small lane is shed.
//
// [RequiresWrite] classifies an operation and fails closed: an operation it
// does not know is a write, which can only cost that operation the read
// lane, never let a write into it.
//
// # Opt-in QoS
//
// [QoS] (EDICT_QOS=1) sits in front of the baseline gate: per-principal
// quota, per-class ceilings (the lowest class is shed first), fair share
// under pressure and a per-(principal, class) token bucket, checked in that
// order, each with its own BUSY text ([Reason.Text]). Time is supplied by the
// caller, so the QoS state machine is deterministic under test.
//
// # Sizing
//
// [Config] zero values are the automatic sizes of the engine spec (§1);
// [ConfigFromEnv], [QoSConfigFromEnv] and [DispatchDeadlineFromEnv] read the
// EDICT_* overrides through a lookup function supplied by cmd/, so nothing in
// this package reads the process environment.
//
// # Concurrency
//
// Pools, [Graphs], [Gate] and [QoS] are safe for concurrent use; every
// acquisition is a non-blocking try. A [Grant] or [QoSPermit] must be
// released exactly once; a second Release is a no-op.
package admission

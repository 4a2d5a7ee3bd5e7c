// Package daemon is the composition root of edict serve: it starts (or
// connects to) NATS, opens the graph store, starts the work-item service and
// the engine's micro service, serves /metrics and /healthz, exports traces,
// and drains everything when its context is cancelled.
//
// Data directory: <data>/engine holds the shard files (store.Open),
// <data>/jetstream the embedded JetStream store.
//
// The embedded NATS server has the two accounts of the README (package
// embedded): the engine runs in ENGINE with a password generated at each
// start, so no application can log into it and Nats-Request-Info is
// trusted; applications connect without credentials as APP. The engine's
// own connection to the embedded server is in-process (no socket). With
// Config.NATSURL no server is embedded and the header is trusted only when
// Config.TrustRequestInfo says so.
//
// Shutdown, once the context is cancelled, is logged step by step: the
// drain of in-flight requests (bounded by Config.Drain), then each part
// closed in reverse order of start (HTTP, engine service, work items, NATS
// connection, embedded server, store writers and shard files, traces,
// metrics), then "stopped cleanly" or the errors.
package daemon

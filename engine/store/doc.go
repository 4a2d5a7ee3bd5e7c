// Package store is the graph engine's storage: K-way sharded bbolt files,
// one group-committing writer per shard, a tenant catalog of routing
// exceptions, online reshard of one graph, and the rebalancer's plumbing.
//
// # Layout and routing
//
// Open(dir, cfg) opens graph-0.db .. graph-<K-1>.db under dir (edict serve
// passes <data>/engine). With no shard files K is Config.Shards (default
// clamp(cpus/2, 1, 8)); otherwise the on-disk K wins. A retired graph.db, a
// non-canonical name (graph-01.db), an invalid or non-contiguous set is
// refused with an ErrLayout error naming the fix: edict migrate-shards.
// A graph routes to ShardIndex(graph, K) — FNV-1a 64 over Sanitize(graph),
// mod K — unless the tenant catalog (catalog.db, attached when
// Config.Catalog is set or the file exists) holds an entry for it. An empty
// catalog routes exactly like the hash.
//
// # Data
//
// Each graph is one top-level bucket holding its nodes, a label index,
// forward and reverse edge indexes (neighbors and node_delete never scan),
// its KV rows and metadata with node/edge/byte counters. Because KV rows live
// in the graph's bucket, a Batch mixes node, edge and KV ops in one
// transaction, and moving a graph (reshard, migrate-shards) is a verbatim
// bucket copy. Limits are checked before anything is queued.
//
// # Writers: group commit
//
// Every mutation is a function queued on its shard's writer goroutine. The
// writer drains what is queued (up to the early-flush depth, lingering 1 ms
// under concurrency) into one bbolt transaction and one fsync, then
// acknowledges each op. An op that fails inside the transaction fails
// alone: the transaction is rolled back and the rest of the group re-run
// without it. bbolt's DB.Batch is not used: it has no bound, lingers 10 ms
// and may run a function twice for reasons we do not control. The queue is
// bounded; a full queue blocks the caller until its ctx is done. Health:
// edict_engine_writer_queue_depth, _batch_ops and _commit_seconds, per shard.
//
// # Reads
//
// Reads open a bbolt read transaction (an MVCC snapshot) on the shard and
// never pass through or wait on a writer. InitialMmapSize (1 GiB by
// default) keeps remaps, which block behind open readers, rare.
//
// # Online reshard
//
// Reshard(graph, shard) bulk-copies the graph to the target while writes
// continue on the source, then takes the graph's routing guard exclusively
// (writers hold it shared from resolve to enqueue, readers until their
// transaction has begun), flushes the source writer, copies the delta,
// flips the catalog durably and purges the source. Only that graph pauses.
// Order import → flip → purge: a crash loses nothing and a re-run finishes.
//
// # Errors
//
// See errors.go: Code maps every error to its wire status (400, 404, 413,
// 503, 500).
//
// # Lifecycle
//
// Close commits what is queued, stops the writers and closes the files; it
// is idempotent, and every later call returns ErrClosed.
package store

// Package work is the engine's durable work-item service: the handler behind
// the edict.work.<op> endpoints of the edict-engine micro service.
//
// # Mechanism
//
// Items live in the JetStream stream EDICT_WORK (work-queue retention, file
// storage, replicas from Config) on subjects edict.workq.<class>.<type>. Each
// (class, type) pair has one durable pull consumer (AckExplicit, DeliverAll,
// MaxDeliver unlimited, AckWait = the longest lease). A work-queue stream
// refuses overlapping consumer filters, so a per-class consumer could not
// serve a claim filtered by type. Consumers are created on the first submit
// of their pair and found again at Open from the stream's consumers.
// JetStream does the durability, redelivery after an expired lease and the
// replication; this package never re-implements them.
//
// One record per item in the JetStream KV bucket EDICT_WORK_STATE holds the
// item's stream sequence, class, type, tenant, max attempts, defer count,
// current delivery count, that delivery's ack reply subject and the state
// (queued, leased, acked, dead). It makes submit idempotent beyond the
// stream's duplicate window, fences settles (also after an engine restart:
// the ack reply subject it keeps still reaches JetStream), counts defers and
// rebuilds the per-tenant lease counts at Open. Every record write is a
// compare-and-set on the entry's revision, so two engines never both win. A
// settle decides on the cached record first; when that fences the token,
// or its compare-and-set loses to a stale entry, it decides once more on
// the stored record.
// The bucket also holds the 32-byte HMAC key of the lease tokens, so tokens
// survive a restart.
//
// # Bounded state and the dedup window
//
// The record of an acknowledged item is written with a per-message TTL of
// Config.DedupWindow (default 1 h; at least 2 min, the work stream's
// Duplicates window, and Lease + 1 min): JetStream removes it then, so the
// bucket holds the live items, the dead letters' records (kept for
// dead_replay) and the items acknowledged within the window. A re-submit of
// an acknowledged id inside the window answers duplicate; after it the id
// is new again and is queued. Because the window is never shorter than the
// stream's Duplicates window, a re-submit that finds no record is never
// swallowed by JetStream's own deduplication.
//
// # The claim and ack path
//
// A claim costs one pull request (CONSUMER.MSG.NEXT, batch 1, on a
// long-lived reply subscription per consumer). Granting a redelivery or a
// shortened lease also writes the record; the first delivery of a full
// lease does not: its token carries the lease expiry and the delivery's
// reply subject under the HMAC, and the lease is written into the record
// once it has been held for Config.RecordAfter (default 1 s) and at Close.
// "Unrecorded grants" in claim.go says why that fences exactly as well, and
// what an engine crash loses: the youngest leases' tenant-quota and
// in_flight counts until they end. Every grant has a random nonce that a
// settle's token must match; for one Lease after Open, and after the
// connection finds another server, every grant is recorded, so a delivery
// JetStream repeats after losing its consumer state in a crash still
// fences the older token.
//
// An ack costs one compare-and-set and the confirmed +ACK, confirmed so
// that a stats or claim right after it no longer counts the item as
// stored; on a replicated stream the ack also waits, up to 250 ms, until
// the stream's removal of the message is applied, which comes after the
// confirmation. The record is the outcome of an ack: should the +ACK be
// lost, the redelivery finds the record acked and acknowledges it without
// handing it out.
//
// An ack may carry next, a claim filter without wait_ms: after the ack the
// same request claims the next item (JetStream's +NXT, one request per item
// for a worker loop instead of two). The reply is {"next": <claim reply>},
// or {"next_error": {"code","text"}} when the ack succeeded and the claim
// failed; a bad next is refused before the ack changes anything, and a
// failed ack claims nothing. When the next claim's first fetch is from the
// acked item's own queue, the +ACK goes out as JetStream's "+NXT" on the
// acked delivery: JetStream acks, then answers with that consumer's next
// message, so one round trip is both the ack's confirmation and the fetch.
// Otherwise, and always on a replicated stream, the confirmed +ACK goes
// first, on its own.
//
// Records this engine wrote are cached with their revision (bounded); a
// stale entry fails its compare-and-set and is re-read, and a copy is only
// ever acknowledged or terminated on the stored record. Which queues a
// claim fetches from comes from this engine's stored counts per queue (one
// Stream.Info at Open, kept current by its own publishes and removals) less
// its live leases and the deliveries it put back with a delay. A claim
// re-reads the counts (one Stream.Info, one claim at a time) when they are
// older than 250 ms and before it would answer empty, and takes on the
// consumers of queues other engines created, so an item another engine
// queued is never missed and, after at most 250 ms, never passed over for a
// lower class. A pull right after this engine's own publish to the queue waits up
// to 20 ms when the no-wait pull misses (a consumer learns of a stored
// message asynchronously).
//
// # Attempts, defer, retry, dead letters
//
// JetStream counts every delivery, a Nak'd one included, toward NumDelivered.
// The attempt of a delivery is therefore NumDelivered − defers: a defer (and a
// put-back for a tenant at its quota) increments the durable defer count and
// then Naks with the delay, consuming no attempt and holding nothing in
// memory. A retry Naks with the item's backoff (30 s · 2^(attempt−1), capped
// at 15 min, proportional jitter in [0.5, 1.0)) or, on the last attempt,
// dead-letters with reason attempts_exhausted. An expired lease is
// redelivered by JetStream and counts as an attempt; a delivery whose attempt
// would exceed max_attempts is dead-lettered with reason lease_exhausted
// instead of being handed out. Dead letters keep the item, its attempts and
// the reason in the stream EDICT_WORK_DEAD (edict.workdead.<class>.<type>,
// limits retention); dead_replay queues them again with fresh attempts.
//
// # Tokens and fencing
//
// A claim's token is an HMAC-SHA256 over (item id, stream sequence, delivery
// count, grant nonce, lease expiry, the delivery's ack reply subject).
// Tokens of an older engine version do not verify (400): drain the workers
// before an upgrade, or let their leases run out. A token that does
// not decode or verify is a 400; a token whose delivery is no longer the
// item's current, live lease (the lease expired and the item went to
// another worker, or it was settled) is a 409 "FENCED: stale lease token"
// and changes nothing.
//
// # Concurrency and lifecycle
//
// A Service is safe for concurrent use: the engine service calls Handle on
// one goroutine per admitted request. Operations on one item are serialized
// inside the engine by a striped lock and across engines by the record's
// compare-and-set. Open creates or updates the streams and the bucket;
// Close stops the timers of shortened leases and makes Handle return 503.
package work

// Package scheduler decides which work a host's workers take and when
// background work yields to foreground work.
//
// # Admission policy
//
// [Policy] is the worker admission policy. It keeps an interactive floor
// ([Policy.InteractiveFloor], min(max(1, reserved), wc−1)) of workers that
// non-interactive lanes can never claim, caps codebase, best-effort (maint)
// and memory_gen work, steers workers to lanes with pending work and no
// running task, and keeps a hot spare. [Policy.Decide] applies the seven
// rules in order and returns the first refusal's exact reason, or
// "admitted". A [Registry] records which worker runs what; the policy reads
// it. Two defects of the reference are fixed: a task of the interactive
// lane is never refused to steer or to keep the spare (so a second
// interactive task lands while the floor holds), and a hydration-reserved
// worker applies the policy to any non-hydration work it claims.
//
// # Worker pool
//
// [Pool] runs [PoolConfig.Workers] workers under [Pool.Run]. Each loop
// takes a process-wide, non-blocking claim gate (a worker that finds it held
// skips its poll), then claims from a [Claimer] per class band so a
// background shed never holds back interactive work: hydration-reserved
// workers first try the hydration task types (under Hydration, without the
// policy), then the three high classes are claimed under Interactive, then
// background_ingestion under BackgroundIngestion. A claimed item goes
// through [Policy.Decide]; a denied one is deferred for U(5, 15) s with
// reason "admission_denied" (no attempt is consumed). An admitted task runs
// under priority.With(ctx, priority.ForTaskType(type)) with its lane's soft
// timeout while its lease is extended every 20 s, and is then settled. An
// idle worker backs off 1, 2, 4, 8, 15, 15, … s (cenkalti/backoff/v4) plus
// U(0, 0.25·b), at least 15 s while foreground is active. Run returns
// after every worker finished its current task.
//
//	pool, err := scheduler.NewPool(scheduler.PoolConfig{
//		Workers: 4,
//		Claimer: client, // e.g. a *workitems.Client
//		Policy:  scheduler.NewPolicy(scheduler.PolicyConfigFromEnv(4), scheduler.NewRegistry()),
//		Handler: run,
//	})
//	if err != nil { … }
//	err = pool.Run(ctx)
//
// # Background throttle
//
// [Throttle] is the cooperative checkpoint of background loops.
// Foreground work enters [Throttle.Foreground], which also publishes a
// lease file (package leases) so background loops in other processes on the
// host see it. [Throttle.Active] is true while this process or another
// process is in foreground; [Throttle.Checkpoint] waits while it is, at most
// MaxWait so background is never starved to zero; [Throttle.Slot] bounds
// concurrent background work and re-checks foreground after taking a slot.
//
// # Concurrency and cancellation
//
// Every type is safe for concurrent use. Blocking calls take a ctx and
// return ctx.Err() when it is done; a cancelled Run cancels running tasks'
// contexts and defers interrupted items back to ready.
package scheduler

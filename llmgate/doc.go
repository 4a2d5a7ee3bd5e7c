// Package llmgate is the priority-aware admission gate for shared LLM
// servers: interactive and orchestration calls to a shared generator land at
// once even while background ingestion saturates it, and background uses all
// the spare capacity when nothing higher contends.
//
// # The gate
//
// A [Gate] guards one model endpoint. It is a counting semaphore of
// Capacity slots, shaped like golang.org/x/sync/semaphore:
//
//	g, err := llmgate.New(llmgate.Config{Capacity: 8})
//	if err := g.Acquire(ctx); err != nil {
//		return err // ctx is done; nothing is held
//	}
//	defer g.Release()
//
// The class of a call is [priority.From] of its context: Interactive,
// Orchestration and Hydration are high, BackgroundIngestion is background,
// and an untagged context is Orchestration, so only explicitly background
// work ever yields.
//
// # The admission arithmetic
//
// One mutex guards the counters and the wait queues, and one predicate
// decides, in this order:
//
//	in flight >= capacity          → refuse (the hard cap, every class)
//	high                           → admit
//	a high caller is waiting       → refuse (background yields)
//	in flight < capacity - reserve → admit background
//
// In flight counts every class, so high traffic shrinks background's share.
// Background can never take the last Reserve slots, so a high call finds a
// free slot at once unless more than Reserve high calls are in flight; a
// burst beyond that queues behind other high calls only, and background is
// refused while it drains.
//
// The reserve is, when [Config.Reserve] is zero, max(1,
// min(roundHalfEven(capacity × fraction), capacity−1)), 0 for capacity 1:
// for capacity 1..16 that is 0,1,1,1,2,2,2,3,3,3,4,4,4,5,5,5, and 11 for 32.
// The fraction is 0.34 unless EDICT_LLM_PRIORITY_RESERVE_FRACTION holds a
// finite number ≥ 0; EDICT_LLM_PRIORITY_RESERVE, an integer ≥ 0, wins over
// the fraction (clamped to capacity−1). A bad value falls back to the
// default. The environment is read when the gate is built, never later.
//
// # Hand-off
//
// When a slot frees, the releaser picks the caller that should have it —
// high callers first, FIFO among them, then background FIFO — counts the
// slot as taken on its behalf and only then wakes it. A woken caller owns its
// slot; a newcomer cannot take it, nor overtake a parked caller of its own
// tier. Every event that can make a parked caller admissible re-evaluates the
// queues: a release, a high caller leaving the queue (admitted or cancelled:
// when the last one goes, background that fits is admitted at once), a
// resize, and the end of the quiet window. A caller whose context ends while
// its slot is being granted gives the slot back; nothing leaks. Waiters are
// pooled, so neither the uncontended path nor, in steady state, the
// contended one allocates.
//
// # The quiet window
//
// [Config.QuietWindow], off by default, re-creates the reference's
// quiet-period rule: for that long after any high admission background's
// ceiling is halved (capacity−reserve integer-divided by 2, floor 1). It
// keeps fewer background calls queued at the server when high calls come in
// waves, at the cost of background throughput: with the window set,
// background no longer uses all spare capacity after high traffic. Its end
// is a timer that admits the background callers it held back.
//
// # Registry, fan-out and Transport
//
// A [Registry] holds one gate per model key (trimmed, lower case, empty is
// [DefaultModel]); a new capacity for a known model resizes its gate in
// place rather than building a second one that would oversubscribe the
// server. [Map] fans a slice out through a gate with the caller's class,
// keeping result order. [Transport] is an http.RoundTripper that gates calls
// to an OpenAI-compatible server by the body's model, holds the slot until
// the response body is read or closed, and can send the class's rank as the
// vLLM request field "priority". Gates are never evicted, so a Transport
// gates at most [Transport.MaxModels] distinct models (1024 by default) and
// refuses a request for one more with [ErrTooManyModels].
//
// # Observability
//
// With a [Config.MeterProvider] a gate exports edict_llmgate_in_flight{model},
// edict_llmgate_waiting{model,class}, edict_llmgate_wait_seconds{model,class}
// (a histogram; every admission is recorded, 0 when it did not wait) and
// edict_llmgate_admitted_total{model,class}; class values are wire names.
// The gauges and the counter are read from the gate at collection time, so
// they cost admission nothing. A gate's metric callback stays registered
// for the life of its meter provider. With a [Config.TracerProvider] a wait
// of at least [Config.SlowWait] is recorded as a child span "llmgate.wait"
// of the caller's span with the attribute edict.priority.class.
package llmgate

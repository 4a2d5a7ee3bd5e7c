package scheduler

import "errors"

// ErrNoClaimer is returned by [NewPool] when [PoolConfig.Claimer] is nil.
var ErrNoClaimer = errors.New("scheduler: pool needs a claimer")

// ErrNoHandler is returned by [NewPool] when [PoolConfig.Handler] is nil.
var ErrNoHandler = errors.New("scheduler: pool needs a task handler")

// ErrSlotTimeout is returned by [Throttle.Slot] when no background slot
// freed up within [ThrottleConfig.AcquireTimeout].
var ErrSlotTimeout = errors.New("scheduler: timed out waiting for a background slot")

// ErrTaskPanic wraps the value a task handler panicked with; the item is
// settled with it (and retried).
var ErrTaskPanic = errors.New("scheduler: task handler panicked")

package workitems

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Config configures a Client. The zero value is the documented default.
type Config struct {
	// Worker is the worker identity claims carry when a request names
	// none; empty means "worker:<32 hex random>", one per Client.
	Worker string
	// Lease is the lease claims ask for when a request names none; zero
	// means 60 s (the engine caps it at its AckWait).
	Lease time.Duration
	// Timeout bounds one request when ctx has no earlier deadline (a
	// long-polling claim gets its Wait on top); zero means 30 s.
	Timeout time.Duration
	// Pacing is the claim-pacing policy; the zero value means
	// DefaultPacingPolicy.
	Pacing PacingPolicy
	// Now is the pacing clock; nil means time.Now (monotonic).
	Now func() time.Time
	// Rand returns uniform values in [0, 1) for pacing jitter; nil means
	// math/rand/v2. It must be safe for concurrent use.
	Rand func() float64
	// Logger receives pacing messages; nil discards them.
	Logger *slog.Logger
	// Propagator injects the request context into message headers; nil
	// means the composite of TraceContext, Baggage and priority.Propagator.
	Propagator propagation.TextMapPropagator
}

package service

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/store"
)

// Level is an access level of a grant.
type Level int

// Access levels; Write includes Read.
const (
	NoAccess Level = iota
	Read
	Write
)

// String returns "Read", "Write" or "None".
func (l Level) String() string {
	switch l {
	case Read:
		return "Read"
	case Write:
		return "Write"
	}
	return "None"
}

// Access grants principals access to graphs: principal → graph name (or
// "*" for every graph) → level.
type Access map[string]map[string]Level

// level returns principal's level on graph.
func (a Access) level(principal, graph string) Level {
	g := a[principal]
	if l, ok := g[graph]; ok {
		return l
	}
	return g["*"]
}

// Config configures the service. The zero value of every field is its
// documented default.
type Config struct {
	// Store serves the graph and admin operations. Nil: those endpoints are
	// registered and answer 500.
	Store *store.Store
	// Work serves the work operations. Nil: the work endpoints are
	// registered and answer 500 "INTERNAL: work items are not configured on
	// this engine".
	Work protocol.Handler
	// Admission sizes the baseline gate; zero fields are automatic.
	Admission admission.Config
	// QoS configures the opt-in QoS layer; the zero value is off.
	QoS admission.QoSConfig
	// DispatchDeadline bounds each admitted request; zero means 600 s.
	DispatchDeadline time.Duration
	// TrustRequestInfo trusts the Nats-Request-Info header for the caller's
	// principal. Set it only when no application can log into the engine's
	// account. False: every caller is anonymous.
	TrustRequestInfo bool
	// Ceilings clamps each principal's class; nil clamps nobody.
	Ceilings identity.Ceilings
	// Access grants principals access to graphs; nil grants every
	// principal Write on every graph.
	Access Access
	// Version is the micro service version (SemVer); "" means "0.1.0".
	Version string
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// TracerProvider creates the server spans; nil means a no-op provider.
	TracerProvider trace.TracerProvider
	// MeterProvider creates the edict_engine_* instruments; nil means a
	// no-op provider.
	MeterProvider metric.MeterProvider
	// Propagator extracts the caller's trace from the request headers; nil
	// means TraceContext, Baggage and priority.Propagator composed.
	Propagator propagation.TextMapPropagator
	// Now is the clock used by QoS token buckets; nil means time.Now.
	Now func() time.Time
}

package llmgate

import (
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// NoReserve, as [Config.Reserve], reserves nothing for high calls: background
// may then use every slot. Any negative Reserve means the same.
const NoReserve = -1

// DefaultModel is the model name used for metric labels and registry keys
// when none is given.
const DefaultModel = "__default__"

// DefaultReserveFraction is the share of capacity reserved for high calls when
// neither [Config.Reserve] nor the environment says otherwise.
const DefaultReserveFraction = 0.34

// DefaultSlowWait is the wait after which an admission is recorded as a span
// when [Config.SlowWait] is zero.
const DefaultSlowWait = 100 * time.Millisecond

// The environment variables read when a gate is built (and only then).
const (
	// EnvReserve is an absolute reserve (an integer ≥ 0, surrounding spaces
	// allowed); it wins over EnvReserveFraction.
	EnvReserve = "EDICT_LLM_PRIORITY_RESERVE"
	// EnvReserveFraction is the auto-size fraction (a finite number ≥ 0).
	EnvReserveFraction = "EDICT_LLM_PRIORITY_RESERVE_FRACTION"
)

// Config configures a [Gate]. The zero value is a gate of capacity 1 with an
// automatic reserve, no quiet window and no telemetry.
type Config struct {
	// Capacity is the most calls in flight at once. Zero or negative means 1.
	Capacity int

	// Reserve is the number of slots background calls may never take, so
	// that high calls land at once. Zero sizes it automatically (see the
	// package documentation: 34% of capacity, at least 1, at most
	// Capacity-1, adjustable through EnvReserve and EnvReserveFraction). A
	// positive value is used as given, clamped to Capacity-1. [NoReserve] (or
	// any negative value) reserves nothing.
	Reserve int

	// Model names the gate in metric labels. Empty means [DefaultModel].
	Model string

	// QuietWindow, when positive, halves background's ceiling (floor 1) for
	// this long after every high admission, as the reference's quiet-period
	// rule does. Zero (the default) turns the rule off: background then uses
	// all of Capacity-Reserve whenever no high call waits. The window trades
	// background throughput for fewer queued background calls ahead of a
	// second wave of high calls at the server.
	QuietWindow time.Duration

	// SlowWait is the admission wait from which a child span "llmgate.wait"
	// with the attribute edict.priority.class is recorded. Zero means
	// [DefaultSlowWait]; a negative value records every wait that blocked.
	SlowWait time.Duration

	// MeterProvider receives the gate's metrics. Nil means no metrics.
	MeterProvider metric.MeterProvider

	// TracerProvider receives slow-wait spans. Nil means no spans.
	TracerProvider trace.TracerProvider
}

// reservePolicy is everything the reserve is derived from, fixed when a gate
// is built so that a resize re-derives it from the same settings.
type reservePolicy struct {
	explicit   int     // Config.Reserve
	envReserve int     // EnvReserve, or -1 when unset or invalid
	fraction   float64 // EnvReserveFraction, or the default
}

// newReservePolicy reads the environment through getenv.
func newReservePolicy(explicit int, getenv func(string) string) reservePolicy {
	p := reservePolicy{explicit: explicit, envReserve: -1, fraction: DefaultReserveFraction}
	if explicit != 0 {
		return p
	}
	if v, ok := parseReserve(getenv(EnvReserve)); ok {
		p.envReserve = v
	}
	p.fraction = parseFraction(getenv(EnvReserveFraction))
	return p
}

// reserve returns the reserve for a gate of the given capacity (≥ 1).
func (p reservePolicy) reserve(capacity int) int {
	switch {
	case p.explicit < 0 || capacity <= 1:
		return 0
	case p.explicit > 0:
		return min(p.explicit, capacity-1)
	case p.envReserve >= 0:
		return min(p.envReserve, capacity-1)
	}
	return autoReserve(capacity, p.fraction)
}

// autoReserve is max(1, min(roundHalfEven(capacity*fraction), capacity-1)),
// and 0 for capacity ≤ 1.
func autoReserve(capacity int, fraction float64) int {
	if capacity <= 1 {
		return 0
	}
	r := math.RoundToEven(float64(capacity) * fraction)
	if !(r < float64(capacity-1)) { // also catches NaN
		return capacity - 1
	}
	return max(1, int(r))
}

// parseReserve parses EnvReserve: an integer ≥ 0 after trimming spaces.
func parseReserve(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// parseFraction parses EnvReserveFraction; anything but a finite number ≥ 0
// gives DefaultReserveFraction.
func parseFraction(s string) float64 {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultReserveFraction
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return DefaultReserveFraction
	}
	return f
}

// modelKey normalises a model name: trimmed, lower case, empty → DefaultModel.
func modelKey(model string) string {
	k := strings.ToLower(strings.TrimSpace(model))
	if k == "" {
		return DefaultModel
	}
	return k
}

// osGetenv is the environment lookup of gates built by New.
func osGetenv(key string) string { return os.Getenv(key) }

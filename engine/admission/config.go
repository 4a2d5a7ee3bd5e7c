package admission

import (
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Environment variable names read by the FromEnv functions.
const (
	EnvMaxInFlight      = "EDICT_MAX_INFLIGHT"
	EnvPerGraph         = "EDICT_MAX_INFLIGHT_PER_GRAPH"
	EnvReadReserved     = "EDICT_READ_RESERVED"
	EnvDispatchDeadline = "EDICT_DISPATCH_DEADLINE"
	EnvQoS              = "EDICT_QOS"
	EnvQoSCapacity      = "EDICT_QOS_CAPACITY"
	EnvQoSQuota         = "EDICT_QOS_PRINCIPAL_QUOTA"
)

// DefaultDispatchDeadline is the dispatch deadline when none is configured.
const DefaultDispatchDeadline = 600 * time.Second

// MaxDispatchDeadline is the longest dispatch deadline accepted (1 day).
const MaxDispatchDeadline = 86400 * time.Second

// Config sizes the baseline gate. Every zero field is automatic: MaxInFlight
// clamp(cpus*64, 256, 8192) with cpus = runtime.GOMAXPROCS(0), PerGraph
// max(MaxInFlight/4, 1), ReadReserved clamp(MaxInFlight/8, 8, 1024), the
// last two derived from the effective MaxInFlight.
type Config struct {
	MaxInFlight  int
	PerGraph     int
	ReadReserved int
}

// Resolve returns c with every automatic field filled in for cpus (values
// below 1 count as 1).
func (c Config) Resolve(cpus int) Config {
	cpus = max(cpus, 1)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = min(max(cpus*64, 256), 8192)
	}
	if c.PerGraph <= 0 {
		c.PerGraph = max(c.MaxInFlight/4, 1)
	}
	if c.ReadReserved <= 0 {
		c.ReadReserved = min(max(c.MaxInFlight/8, 8), 1024)
	}
	return c
}

// Effective returns c resolved for runtime.GOMAXPROCS(0).
func (c Config) Effective() Config { return c.Resolve(runtime.GOMAXPROCS(0)) }

// ConfigFromEnv reads EDICT_MAX_INFLIGHT, EDICT_MAX_INFLIGHT_PER_GRAPH and
// EDICT_READ_RESERVED through getenv (os.Getenv in cmd/). A value that
// parses as an integer > 0 wins; anything else leaves the field automatic.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{
		MaxInFlight:  positive(getenv(EnvMaxInFlight)),
		PerGraph:     positive(getenv(EnvPerGraph)),
		ReadReserved: positive(getenv(EnvReadReserved)),
	}
}

// DispatchDeadlineFromEnv reads EDICT_DISPATCH_DEADLINE (whole seconds)
// through getenv: a positive integer is clamped to 1..86,400 s; anything
// else is the 600 s default.
func DispatchDeadlineFromEnv(getenv func(string) string) time.Duration {
	v := positive(getenv(EnvDispatchDeadline))
	if v == 0 {
		return DefaultDispatchDeadline
	}
	return min(time.Duration(v)*time.Second, MaxDispatchDeadline)
}

// QoSConfig configures the opt-in QoS layer. The zero value is off.
type QoSConfig struct {
	// Enabled turns QoS on; off, it is never consulted.
	Enabled bool
	// Capacity is the QoS capacity; 0 means max_in_flight, and an explicit
	// value is bounded by max_in_flight.
	Capacity int
	// PrincipalQuota is the in-flight quota of one principal; 0 means
	// max(capacity/4, 1), and an explicit value is bounded by capacity.
	PrincipalQuota int
}

// QoSConfigFromEnv reads EDICT_QOS (1, true, on or yes, trimmed and in any
// case, enable it), EDICT_QOS_CAPACITY and EDICT_QOS_PRINCIPAL_QUOTA through
// getenv.
func QoSConfigFromEnv(getenv func(string) string) QoSConfig {
	var c QoSConfig
	switch strings.ToLower(strings.TrimSpace(getenv(EnvQoS))) {
	case "1", "true", "on", "yes":
		c.Enabled = true
	}
	c.Capacity = positive(getenv(EnvQoSCapacity))
	c.PrincipalQuota = positive(getenv(EnvQoSQuota))
	return c
}

// positive parses s as an integer > 0, else returns 0.
func positive(s string) int {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

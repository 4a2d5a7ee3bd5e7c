package work

import (
	"log/slog"
	"math/rand/v2"
	"time"
)

// Names of the JetStream resources the service owns.
const (
	// StreamName is the work stream.
	StreamName = "EDICT_WORK"
	// DeadStreamName is the dead-letter stream.
	DeadStreamName = "EDICT_WORK_DEAD"
	// StateBucket is the KV bucket of item records and the token key.
	StateBucket = "EDICT_WORK_STATE"
	// SubjectPrefix prefixes the work stream's subjects: edict.workq.<class>.<type>.
	SubjectPrefix = "edict.workq."
	// DeadSubjectPrefix prefixes the dead-letter subjects: edict.workdead.<class>.<type>.
	DeadSubjectPrefix = "edict.workdead."
)

// Defaults and limits.
const (
	DefaultLease       = 60 * time.Second
	DefaultTenantQuota = 64
	MaxTenantQuota     = 4096
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 1000
	DefaultRetryBase   = 30 * time.Second
	DefaultRetryMax    = 15 * time.Minute
	MaxTypes           = 256
	MaxWait            = 30 * time.Second
	DefaultDedupWindow = time.Hour
	DefaultRecordAfter = time.Second
	MinDedupWindow     = 2 * time.Minute // the work stream's Duplicates window
	DefaultDeadLimit   = 100
	MaxDeadLimit       = 1000
	MaxReplayIDs       = 1000
	MaxReasonLen       = 1024
)

// Config configures a Service. The zero value is the documented default.
type Config struct {
	// Replicas is the replica count of the streams and the bucket; zero
	// means 1 (a single server). Use 3 on a clustered NATS.
	Replicas int
	// Lease is the consumers' AckWait, the longest lease a claim can get;
	// zero means 60 s. A claim's lease_seconds may shorten it, never
	// lengthen it; extend restarts a full Lease.
	Lease time.Duration
	// TenantQuota caps the live leases of one tenant; zero means 64,
	// values are clamped to 1..4096.
	TenantQuota int
	// MaxAttempts is the default of a submit without max_attempts; zero
	// means 3.
	MaxAttempts int
	// RetryBase and RetryMax shape a retry's delay:
	// RetryBase·2^(attempt−1) capped at RetryMax, times a proportional
	// jitter in [0.5, 1.0). Zero means 30 s and 15 min.
	RetryBase time.Duration
	RetryMax  time.Duration
	// QuotaDelay is how long an item whose tenant is at its quota is put
	// back for; zero means 1 s.
	QuotaDelay time.Duration
	// PollInterval is how often a long-polling claim (wait_ms) looks again;
	// zero means 50 ms.
	PollInterval time.Duration
	// DedupWindow is how long the record of an acknowledged item is kept:
	// a re-submit of its id within the window answers duplicate, after it
	// the id is new again. Zero means 1 h; it is raised to at least
	// 2 min (the work stream's Duplicates window) and Lease + 1 min (so a
	// redelivery after a lost ack still finds the item acknowledged).
	DedupWindow time.Duration
	// RecordAfter is how long a first delivery's full lease is held before
	// it is written into the item's record (claim.go, "Unrecorded grants");
	// zero means 1 s.
	RecordAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand returns a uniform value in [0, 1) for retry jitter; nil means
	// math/rand/v2.
	Rand func() float64
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	switch {
	case c.TenantQuota <= 0:
		c.TenantQuota = DefaultTenantQuota
	case c.TenantQuota > MaxTenantQuota:
		c.TenantQuota = MaxTenantQuota
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxAttempts > MaxMaxAttempts {
		c.MaxAttempts = MaxMaxAttempts
	}
	if c.RetryBase <= 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.QuotaDelay <= 0 {
		c.QuotaDelay = time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.RecordAfter <= 0 {
		c.RecordAfter = DefaultRecordAfter
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	c.DedupWindow = max(c.DedupWindow, MinDedupWindow, c.Lease+time.Minute)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

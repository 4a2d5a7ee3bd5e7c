package leases

import (
	"log/slog"
	"time"
)

// Defaults and bounds of [Config].
const (
	DefaultTTL           = 3 * time.Second
	DefaultRefresh       = 1 * time.Second
	DefaultCacheInterval = 250 * time.Millisecond
	DefaultMaxEntries    = 128
	// MaxRecordSize is the largest lease file a scanner reads, in bytes.
	MaxRecordSize = 256

	minTTL     = 50 * time.Millisecond
	minRefresh = 10 * time.Millisecond
)

// Config tunes a lease holder and a scanner. The zero value gives the
// defaults; holders and scanners that talk to each other should use the
// same TTL.
type Config struct {
	// TTL is how long a record stays live after its last write. Zero means
	// 3 s; it is clamped to at least 50 ms.
	TTL time.Duration
	// Refresh is how often a holder rewrites its record. Zero means 1 s; it
	// is clamped to max(10 ms, min(Refresh, TTL/2)).
	Refresh time.Duration
	// CacheInterval is how long a scanner reuses its last answer. Zero means
	// 250 ms; a negative value disables the cache (every Active scans).
	CacheInterval time.Duration
	// MaxEntries bounds the directory entries of any kind one scan
	// inspects. Zero or negative means 128.
	MaxEntries int
	// Now returns the current time. Nil means time.Now. Expiry is compared
	// on its wall-clock reading, the cache on its monotonic reading.
	Now func() time.Time
	// Logger receives refresh and removal failures at debug level. Nil
	// discards them.
	Logger *slog.Logger
}

func (c Config) ttl() time.Duration {
	if c.TTL == 0 {
		return DefaultTTL
	}
	return max(c.TTL, minTTL)
}

func (c Config) refresh() time.Duration {
	r := c.Refresh
	if r == 0 {
		r = DefaultRefresh
	}
	return max(minRefresh, min(r, c.ttl()/2))
}

func (c Config) cacheInterval() time.Duration {
	switch {
	case c.CacheInterval == 0:
		return DefaultCacheInterval
	case c.CacheInterval < 0:
		return 0
	}
	return c.CacheInterval
}

func (c Config) maxEntries() int {
	if c.MaxEntries <= 0 {
		return DefaultMaxEntries
	}
	return c.MaxEntries
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

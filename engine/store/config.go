package store

import (
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Config configures a Store. The zero value is the documented default for
// every field.
type Config struct {
	// Shards is the shard count K used when dir holds no shard files yet.
	// Zero (or negative) means clamp(cpus/2, 1, 8); an explicit value is
	// clamped to 1..64. When shard files exist the on-disk count wins.
	Shards int

	// Catalog attaches the tenant catalog (dir/catalog.db), creating it if
	// needed. A catalog.db that already exists is attached even when
	// Catalog is false. Online reshard needs an attached catalog.
	Catalog bool

	// QueueSize bounds each shard writer's queue. Zero means
	// clamp(cpus*256, 1024, 65536). A full queue blocks the caller until
	// its ctx is done (back-pressure, never a dropped write).
	QueueSize int

	// FlushThreshold is the most operations one group commit takes (the
	// early-flush depth). Zero means clamp(QueueSize/2, 256, 16384); an
	// explicit value is min(clamp(v, 64, 1048576), automatic).
	FlushThreshold int

	// Linger is how long a writer waits for a shallow batch to fill before
	// committing; it applies only while the previous commit carried more
	// than one operation (under concurrency), so a lone writer never pays
	// it. Zero means 1 ms; negative disables lingering.
	Linger time.Duration

	// InitialMmapSize is passed to bbolt for every shard so remaps (which
	// wait for open read transactions) stay rare. Zero means 1 GiB; it is
	// address space, not memory. Negative means bbolt's default (0).
	InitialMmapSize int

	// MeterProvider receives the writer metrics
	// (edict_engine_writer_queue_depth, _batch_ops, _commit_seconds, each
	// labelled shard). Nil means a no-op provider.
	MeterProvider metric.MeterProvider

	// Logger receives operational messages. Nil discards them.
	Logger *slog.Logger
}

// Limits on stored values. Violations are reported before anything is
// written: an empty or malformed value is ErrInvalid, an oversized one a
// *LimitError.
const (
	MaxIDBytes        = 512              // node id, 1..512 bytes
	MaxTypeBytes      = 512              // edge type, 1..512 bytes
	MaxLabelBytes     = 512              // one label, 1..512 bytes
	MaxLabels         = 1024             // labels per node
	MaxPropsBytes     = 1 << 20          // node or edge props as JSON
	MaxNamespaceBytes = 256              // KV namespace, 1..256 bytes, no NUL
	MaxKeyBytes       = 4 << 10          // KV key, ≤ 4 KiB, no NUL
	MaxValueBytes     = 8 << 20          // KV value
	MaxBatchOps       = 10000            // operations in one batch
	DefaultScanLimit  = 10000            // kv_scan limit 0
	MaxScanLimit      = 100000           // kv_scan limit cap
	MaxScanBytes      = 64 << 20         // kv_scan reply bytes
	DefaultListLimit  = 1000             // nodes_by_label / neighbors limit 0
	MaxListLimit      = 100000           // nodes_by_label / neighbors limit cap
	DefaultTraverse   = 10000            // traverse node limit 0
	MaxTraverseDepth  = 1024             // traverse depth cap
	MaxShards         = 64               // shard count cap
	defaultMmap       = 1 << 30          // 1 GiB
	maxFlushThreshold = 1 << 20          // explicit FlushThreshold cap
	defaultLinger     = time.Millisecond // Linger zero
)

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// DefaultShards returns the shard count used when Config.Shards is zero:
// clamp(cpus/2, 1, 8).
func DefaultShards() int { return clamp(runtime.GOMAXPROCS(0)/2, 1, 8) }

func (c Config) shards() int {
	if c.Shards <= 0 {
		return DefaultShards()
	}
	return clamp(c.Shards, 1, MaxShards)
}

func (c Config) queueSize() int {
	if c.QueueSize > 0 {
		return c.QueueSize
	}
	return clamp(runtime.GOMAXPROCS(0)*256, 1024, 65536)
}

func (c Config) flushThreshold() int {
	auto := clamp(c.queueSize()/2, 256, 16384)
	if c.FlushThreshold > 0 {
		return min(clamp(c.FlushThreshold, 64, maxFlushThreshold), auto)
	}
	return auto
}

func (c Config) linger() time.Duration {
	switch {
	case c.Linger == 0:
		return defaultLinger
	case c.Linger < 0:
		return 0
	}
	return c.Linger
}

func (c Config) mmapSize() int {
	switch {
	case c.InitialMmapSize == 0:
		return defaultMmap
	case c.InitialMmapSize < 0:
		return 0
	}
	return c.InitialMmapSize
}

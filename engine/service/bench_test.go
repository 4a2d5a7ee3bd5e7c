package service_test

import (
	"testing"

	"github.com/edictrt/edict/internal/daemon/enginebench"
)

// BenchmarkNodeRead reports x-vs-micro-echo: a node_get round trip through
// the service over a bare micro echo endpoint on the same server.
func BenchmarkNodeRead(b *testing.B) { enginebench.NodeRead(b) }

// BenchmarkReadsUnderWriteFlood reports reads-shed and p99-x-vs-idle for
// interactive reads while writers flood the gate.
func BenchmarkReadsUnderWriteFlood(b *testing.B) { enginebench.ReadsUnderWriteFlood(b) }

// BenchmarkReadsUnderRetryStorm is BenchmarkReadsUnderWriteFlood under a
// fixed 1 ms retry storm of 16 writers (see BENCHMARKS.md).
func BenchmarkReadsUnderRetryStorm(b *testing.B) { enginebench.ReadsUnderRetryStorm(b) }

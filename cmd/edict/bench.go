package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/edictrt/edict/internal/daemon/enginebench"
)

// benchmark is one benchmark edict bench runs.
type benchmark struct {
	name string
	fn   func(*testing.B)
	// metrics are the reported ratios to print, in order.
	metrics []string
}

func benchmarks() []benchmark {
	return []benchmark{
		{"engine/node-read", enginebench.NodeRead, []string{"x-vs-micro-echo"}},
		{"engine/reads-under-write-flood", enginebench.ReadsUnderWriteFlood, []string{"reads-shed", "writes-shed", "reads-reserved-pct", "p99-x-vs-idle", "idle-p99-µs", "flood-p99-µs", "idle-cpu-cores", "flood-cpu-cores"}},
		{"engine/reads-under-retry-storm", enginebench.ReadsUnderRetryStorm, []string{"reads-shed", "writes-shed", "reads-reserved-pct", "p99-x-vs-idle", "idle-p99-µs", "flood-p99-µs", "idle-cpu-cores", "flood-cpu-cores"}},
	}
}

// runBench runs the long benchmarks and prints each one's ratios against
// its baseline measured in the same run.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("run", "", "run only the benchmarks whose name contains this text")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: edict bench [flags]

Runs the engine benchmarks in this process, each against its own temporary
NATS server and data directory, and prints their ratios:
  engine/node-read                node_get round trip through edict-engine vs a bare
                                  micro echo endpoint on the same server (target <= 2)
  engine/reads-under-write-flood  interactive reads while ingest writers on two graphs
                                  hold every permit and the surplus is shed: reads shed
                                  (target 0), share of reads on the reserved lane, p99 vs
                                  idle p99 (target <= 2), CPU cores used idle and flooded
  engine/reads-under-retry-storm  the same under 16 writers retrying 1 ms after each BUSY
                                  (a badly behaved client; no target, for comparison)

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseCommand(fs, args, stdout, stderr); !ok {
		return code
	}
	testing.Init()
	for _, bm := range benchmarks() {
		if ctx.Err() != nil {
			return 1
		}
		if *only != "" && !strings.Contains(bm.name, *only) {
			continue
		}
		res := testing.Benchmark(bm.fn)
		if res.N == 0 {
			fmt.Fprintf(stderr, "edict bench: %s failed\n", bm.name)
			return 1
		}
		fmt.Fprintf(stdout, "%-32s %8d ops %12d ns/op", bm.name, res.N, res.NsPerOp())
		for _, m := range bm.metrics {
			fmt.Fprintf(stdout, "  %s=%.4g", m, res.Extra[m])
		}
		fmt.Fprintln(stdout)
	}
	return 0
}

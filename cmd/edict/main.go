// Command edict is the edict daemon and its tools: serve runs the engine
// (with an embedded NATS server by default), migrate-shards changes the shard
// count of a stopped engine, bench runs the long benchmarks, and the client
// subcommands (graph, kv, work, status) talk to a running daemon over NATS.
//
// Run "edict help" or "edict <command> --help" for every flag.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	// run executes the command with its arguments (without the command
	// name) and returns the process exit code.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the engine daemon (embedded NATS + JetStream by default)", runServe},
		{"migrate-shards", "change the shard count of a stopped engine's data directory", runMigrateShards},
		{"graph", "graph operations on a running daemon (put, get, delete, neighbors, traverse)", runGraph},
		{"kv", "key-value operations on a running daemon (get, put)", runKV},
		{"work", "work items on a running daemon (submit, claim, stats, dead)", runWork},
		{"status", "service stats of a running daemon: per-class in flight and shed counts", runStatus},
		{"bench", "run the long benchmarks and print ratios against their baselines", runBench},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "edict: a priority-scheduling runtime for agent systems")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: edict <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-15s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "edict <command> --help" for a command's flags.`)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			// The first SIGINT/SIGTERM cancels ctx (graceful drain); once
			// it has, stop() restores the default handling, so a second
			// signal exits at once.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); stop() }()
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "edict: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

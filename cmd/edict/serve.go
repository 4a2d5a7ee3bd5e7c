package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/internal/daemon"
)

// envOr returns the environment variable name, or def when it is unset or
// empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envBool parses the environment variable name as a boolean (1, true, on,
// yes / 0, false, off, no), or returns def.
func envBool(name string, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "1", "true", "on", "yes":
		return true
	case "0", "false", "off", "no":
		return false
	}
	return def
}

// envInt parses the environment variable name as an integer, or returns def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name))); err == nil {
		return v
	}
	return def
}

// ceilingFlag is the repeatable --ceiling PRINCIPAL=CLASS; its initial
// value comes from EDICT_CEILINGS, which the first --ceiling replaces.
type ceilingFlag struct {
	specs   []string
	fromEnv bool
}

func (c *ceilingFlag) String() string { return strings.Join(c.specs, ",") }

func (c *ceilingFlag) Set(v string) error {
	if _, err := identity.ParseCeilings([]string{v}); err != nil {
		return err
	}
	if c.fromEnv {
		c.specs, c.fromEnv = nil, false
	}
	c.specs = append(c.specs, v)
	return nil
}

// runServe runs the engine daemon until SIGINT/SIGTERM (a second signal
// exits at once).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg daemon.Config
	fs.StringVar(&cfg.DataDir, "data", envOr("EDICT_DATA_DIR", daemon.DefaultDataDir),
		"data directory: shards under DIR/engine, the embedded JetStream store under DIR/jetstream (env EDICT_DATA_DIR)")
	fs.StringVar(&cfg.Listen, "listen", envOr("EDICT_LISTEN", daemon.DefaultListen),
		"HOST:PORT of the embedded NATS server's client listener (env EDICT_LISTEN)")
	fs.StringVar(&cfg.HTTP, "http", envOr("EDICT_HTTP", daemon.DefaultHTTP),
		"HOST:PORT serving /metrics (Prometheus) and /healthz, or off (env EDICT_HTTP)")
	fs.IntVar(&cfg.Shards, "shards", envInt("EDICT_SHARDS", 0),
		"shard count K for a new data directory, 1..64; 0 means clamp(cpus/2, 1, 8); an existing directory keeps its K (env EDICT_SHARDS)")
	fs.StringVar(&cfg.NATSURL, "nats-url", os.Getenv("EDICT_NATS_URL"),
		"connect to this existing NATS deployment instead of embedding a server; it needs the accounts, exports and imports shown in the README, section Using an existing NATS deployment (env EDICT_NATS_URL)")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", os.Getenv("EDICT_NATS_CREDS"),
		"credentials file for --nats-url (env EDICT_NATS_CREDS)")
	ceilings := &ceilingFlag{specs: identity.SplitList(os.Getenv("EDICT_CEILINGS")), fromEnv: true}
	fs.Var(ceilings, "ceiling",
		"PRINCIPAL=CLASS: hold PRINCIPAL (<account>/<user>, e.g. APP/ingest) to at most CLASS; repeatable (env EDICT_CEILINGS, comma-separated)")
	trustDefault := os.Getenv("EDICT_TRUST_REQUEST_INFO")
	trust := fs.Bool("trust-request-info", envBool("EDICT_TRUST_REQUEST_INFO", false),
		"trust the Nats-Request-Info header for caller identity; on by default with the embedded server, off with --nats-url; "+
			"set it only when no application can log into the engine's account (env EDICT_TRUST_REQUEST_INFO)")
	fs.StringVar(&cfg.Trace, "trace", envOr("EDICT_TRACE", daemon.TraceOff), "trace export: otlp, stdout or off (env EDICT_TRACE)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", os.Getenv("EDICT_OTLP_ENDPOINT"),
		"HOST:PORT of the OTLP/gRPC trace collector for --trace otlp; empty uses OTEL_EXPORTER_OTLP_ENDPOINT (env EDICT_OTLP_ENDPOINT)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: edict serve [flags]

Runs the edict engine: an embedded NATS server with JetStream (two accounts:
ENGINE for the engine, APP for applications, which connect without
credentials) or --nats-url, the graph store, work items and the
edict-engine micro service. SIGINT/SIGTERM drain in-flight requests, flush
the writers and close the files; a second signal exits at once.

Each flag has an EDICT_ environment twin; a flag wins over its twin.
Admission sizes come from EDICT_MAX_INFLIGHT, EDICT_MAX_INFLIGHT_PER_GRAPH,
EDICT_READ_RESERVED and EDICT_DISPATCH_DEADLINE; EDICT_QOS=1 enables QoS
(EDICT_QOS_CAPACITY, EDICT_QOS_PRINCIPAL_QUOTA); EDICT_TENANT_CATALOG=1
attaches the tenant catalog. Unless GOGC is set the daemon runs its garbage
collector at GOGC=400 (its live heap is small; see engine/service/BENCHMARKS.md).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseCommand(fs, args, stdout, stderr); !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["trust-request-info"] || trustDefault != "" {
		cfg.TrustRequestInfo = trust
	}
	cs, err := identity.ParseCeilings(ceilings.specs)
	if err != nil {
		fmt.Fprintf(stderr, "edict serve: %v\n", err)
		return 2
	}
	cfg.Ceilings = cs
	cfg.Admission = admission.ConfigFromEnv(os.Getenv)
	cfg.QoS = admission.QoSConfigFromEnv(os.Getenv)
	cfg.DispatchDeadline = admission.DispatchDeadlineFromEnv(os.Getenv)
	cfg.Catalog = envBool("EDICT_TENANT_CATALOG", false)
	cfg.TraceOutput = stdout
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger = log
	// The process is the daemon's: tune its collector (daemon.GCPercent)
	// unless the operator chose GOGC.
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(daemon.GCPercent)
		gogc = strconv.Itoa(daemon.GCPercent)
	}
	log.Info("edict serve: starting", "data", cfg.DataDir, "gomaxprocs", runtime.GOMAXPROCS(0), "gogc", gogc)
	if err := daemon.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "edict serve: %v\n", err)
		return 1
	}
	return 0
}

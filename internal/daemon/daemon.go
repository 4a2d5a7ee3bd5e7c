package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/store"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/daemon/embedded"
)

// Defaults of Config.
const (
	DefaultDataDir = "./edict-data"
	DefaultListen  = "127.0.0.1:4222"
	DefaultHTTP    = "127.0.0.1:8222"
	// DefaultDrain bounds the graceful drain of in-flight requests.
	DefaultDrain = 30 * time.Second
)

// GCPercent is the garbage collector target edict serve runs at unless GOGC
// is set. The daemon's live heap is a few MB (bbolt's pages are mmapped, not
// heap), so at Go's default of 100 the collector runs every few
// milliseconds under load and its cycles were most of the idle read latency
// tail (engine/service/BENCHMARKS.md); 400 costs a few tens of MB.
const GCPercent = 400

// Trace exporters.
const (
	TraceOff    = "off"
	TraceStdout = "stdout"
	TraceOTLP   = "otlp"
)

// Config configures the daemon. The zero value of every field is its
// documented default.
type Config struct {
	// DataDir is the data directory; "" means ./edict-data.
	DataDir string
	// Listen is the embedded NATS server's client address; "" means
	// 127.0.0.1:4222 (port 0: a random port).
	Listen string
	// HTTP is the /metrics and /healthz address; "" means 127.0.0.1:8222,
	// "off" disables it (port 0: a random port).
	HTTP string
	// Shards is K for a new data directory; 0 means automatic.
	Shards int
	// Catalog attaches the tenant catalog (EDICT_TENANT_CATALOG=1).
	Catalog bool
	// NATSURL connects to an existing NATS deployment instead of embedding
	// a server; NATSCreds is its credentials file ("" for none).
	NATSURL   string
	NATSCreds string
	// TrustRequestInfo trusts Nats-Request-Info; nil means on with the
	// embedded server and off with NATSURL.
	TrustRequestInfo *bool
	// Ceilings clamps principals' classes; nil clamps nobody.
	Ceilings identity.Ceilings
	// Admission, QoS and DispatchDeadline configure engine admission (zero:
	// automatic, off, 600 s).
	Admission        admission.Config
	QoS              admission.QoSConfig
	DispatchDeadline time.Duration
	// Trace selects the trace exporter: "off" or "" (none), "stdout"
	// (written to TraceOutput) or "otlp" (gRPC to OTLPEndpoint, or the OTel
	// environment's endpoint when "").
	Trace        string
	OTLPEndpoint string
	// TraceOutput receives stdout traces; nil means os.Stdout.
	TraceOutput io.Writer
	// Drain bounds the graceful drain at shutdown; 0 means 30 s.
	Drain time.Duration
	// Logger receives the daemon's log; nil discards it.
	Logger *slog.Logger
	// Ready, if set, is called once the daemon serves.
	Ready func(Info)
}

// Info describes a serving daemon.
type Info struct {
	// NATSURL is the URL clients connect to.
	NATSURL string
	// HTTPURL is the base URL of /metrics and /healthz ("" when off).
	HTTPURL string
	// Sizes are the effective admission sizes.
	Sizes admission.Config
	// Shards is K.
	Shards int
}

// Run runs the daemon until ctx is cancelled, then drains in-flight
// requests, flushes the writers and closes the files. It returns nil after
// a clean shutdown.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.Drain <= 0 {
		cfg.Drain = DefaultDrain
	}
	// closers run in reverse order; once stopping, each logs what it did,
	// so a person watching the log sees the stop step by step.
	var closers []closer
	stopping := false
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			c := closers[i]
			if cerr := c.fn(); cerr != nil {
				log.Warn("edict serve: "+c.what, "error", cerr)
				err = errors.Join(err, cerr)
			} else if stopping {
				log.Info("edict serve: " + c.what)
			}
		}
		if stopping {
			if err != nil {
				log.Error("edict serve: stopped with errors", "error", err)
			} else {
				log.Info("edict serve: stopped cleanly")
			}
		}
	}()
	add := func(what string, fn func() error) { closers = append(closers, closer{what, fn}) }

	// Metrics: the OTel Prometheus exporter on its own registry.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return fmt.Errorf("daemon: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	add("metrics stopped", func() error { return mp.Shutdown(context.Background()) })

	tp, shutdownTraces, err := tracerProvider(ctx, cfg)
	if err != nil {
		return err
	}
	add("traces flushed", shutdownTraces)

	// Store.
	st, err := store.Open(filepath.Join(cfg.DataDir, "engine"), store.Config{
		Shards: cfg.Shards, Catalog: cfg.Catalog, MeterProvider: mp, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	add(fmt.Sprintf("store writers flushed, shard files closed (K=%d)", st.Shards()), st.Close)

	// NATS.
	var natsURL string
	var connOpts []nats.Option
	trust := false
	if cfg.NATSURL == "" {
		host, port, err := splitHostPort(cfg.Listen, DefaultListen)
		if err != nil {
			return err
		}
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts, creds, err := embedded.Options(embedded.Config{Host: host, Port: port, StoreDir: filepath.Join(cfg.DataDir, "jetstream")})
		if err != nil {
			return err
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			return fmt.Errorf("daemon: nats server: %w", err)
		}
		ns.Start()
		add("embedded nats server stopped", func() error { ns.Shutdown(); ns.WaitForShutdown(); return nil })
		if !ns.ReadyForConnections(30 * time.Second) {
			return errors.New("daemon: embedded nats server not ready within 30s")
		}
		natsURL = ns.ClientURL()
		// The engine talks to its own server in-process: no TCP syscalls
		// on the engine's side of each request (BENCHMARKS.md of
		// engine/service). Applications use natsURL.
		connOpts = append(connOpts, nats.UserInfo(creds.User, creds.Password), nats.InProcessServer(ns))
		trust = true
	} else {
		natsURL = cfg.NATSURL
		if cfg.NATSCreds != "" {
			connOpts = append(connOpts, nats.UserCredentials(cfg.NATSCreds))
		}
	}
	if cfg.TrustRequestInfo != nil {
		trust = *cfg.TrustRequestInfo
	}
	connOpts = append(connOpts, nats.Name("edict-engine"), nats.MaxReconnects(-1))
	nc, err := nats.Connect(natsURL, connOpts...)
	if err != nil {
		return fmt.Errorf("daemon: connect %s: %w", natsURL, err)
	}
	add("nats connection flushed and closed", func() error {
		_ = nc.FlushTimeout(5 * time.Second) // replies of drained requests
		nc.Close()
		return nil
	})

	// Work items on JetStream in the engine's account.
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("daemon: jetstream: %w", err)
	}
	ws, err := work.Open(ctx, js, work.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("daemon: work items: %w", err)
	}
	add("work items closed", ws.Close)

	svc, err := service.Start(ctx, nc, service.Config{
		Store:            st,
		Work:             ws,
		Admission:        cfg.Admission,
		QoS:              cfg.QoS,
		DispatchDeadline: cfg.DispatchDeadline,
		TrustRequestInfo: trust,
		Ceilings:         cfg.Ceilings,
		Logger:           log,
		TracerProvider:   tp,
		MeterProvider:    mp,
	})
	if err != nil {
		return err
	}
	drained := false
	add("engine service stopped", func() error {
		if drained {
			return nil
		}
		return svc.Close()
	})

	// HTTP: /metrics and /healthz.
	var httpURL string
	if cfg.HTTP != "off" {
		addr := cfg.HTTP
		if addr == "" {
			addr = DefaultHTTP
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("daemon: http listen: %w", err)
		}
		httpURL = "http://" + ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !nc.IsConnected() {
				http.Error(w, "nats disconnected", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "ok\n")
		})
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		add("http server stopped", func() error {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := hs.Shutdown(sctx)
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			return err
		})
	}

	info := Info{NATSURL: natsURL, HTTPURL: httpURL, Sizes: svc.Sizes(), Shards: st.Shards()}
	httpLog := httpURL
	if httpLog == "" {
		httpLog = "off"
	}
	log.Info("edict serve: ready", "nats", natsURL, "http", httpLog, "data", cfg.DataDir, "shards", info.Shards,
		"max_in_flight", info.Sizes.MaxInFlight, "per_graph", info.Sizes.PerGraph, "read_reserved", info.Sizes.ReadReserved,
		"trust_request_info", trust, "qos", cfg.QoS.Enabled)
	if cfg.Ready != nil {
		cfg.Ready(info)
	}

	<-ctx.Done()
	stopping = true
	t0 := time.Now()
	log.Info("edict serve: stopping: no new requests, draining in-flight ones (a second signal exits at once)",
		"in_flight", svc.InFlight(), "timeout", cfg.Drain)
	dctx, cancel := context.WithTimeout(context.Background(), cfg.Drain)
	defer cancel()
	drained = true
	if err := svc.Shutdown(dctx); err != nil {
		log.Warn("edict serve: drain incomplete, abandoned requests were cancelled", "error", err, "after", time.Since(t0).Round(time.Millisecond))
	} else {
		log.Info("edict serve: in-flight requests drained", "after", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// closer is one shutdown step and the log line it prints once done.
type closer struct {
	what string
	fn   func() error
}

func splitHostPort(addr, def string) (string, int, error) {
	if addr == "" {
		addr = def
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: listen %q: %v", ErrConfig, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: listen %q: bad port", ErrConfig, addr)
	}
	return host, port, nil
}

func tracerProvider(ctx context.Context, cfg Config) (trace.TracerProvider, func() error, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Trace {
	case "", TraceOff:
		return tracenoop.NewTracerProvider(), func() error { return nil }, nil
	case TraceStdout:
		w := cfg.TraceOutput
		if w == nil {
			w = os.Stdout
		}
		exp, err = stdouttrace.New(stdouttrace.WithWriter(w))
	case TraceOTLP:
		var opts []otlptracegrpc.Option
		if cfg.OTLPEndpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint), otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, nil, fmt.Errorf("%w: trace %q: want otlp, stdout or off", ErrConfig, cfg.Trace)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("daemon: trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return tp.Shutdown(sctx)
	}, nil
}

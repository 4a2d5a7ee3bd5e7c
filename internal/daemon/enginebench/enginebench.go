// Package enginebench holds the engine service's benchmarks as ordinary
// functions, so the same code runs under "go test -bench" (engine/service)
// and from "edict bench" (through testing.Benchmark). Each benchmark starts
// its own two-account nats-server and store in a temporary directory, the
// engine connected in-process and the clients over TCP, at edict serve's
// collector setting, and reports a ratio against a baseline measured in the
// same run.
package enginebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/store"
	"github.com/edictrt/edict/internal/daemon"
	"github.com/edictrt/edict/internal/daemon/embedded"
)

// timeout bounds each benchmark request.
const timeout = 10 * time.Second

// Env is a running server, store and engine service for a benchmark.
type Env struct {
	Server *server.Server
	Store  *store.Store
	Svc    *service.Service
	Engine *nats.Conn
	App    *nats.Conn
	dir    string
}

// Start starts an Env with the admission sizes adm; Close releases it.
func Start(adm admission.Config) (*Env, error) {
	dir, err := os.MkdirTemp("", "edict-bench-")
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir}
	fail := func(err error) (*Env, error) { e.Close(); return nil, err }
	opts, creds, err := embedded.Options(embedded.Config{Port: server.RANDOM_PORT, StoreDir: dir + "/jetstream"})
	if err != nil {
		return fail(err)
	}
	if e.Server, err = server.NewServer(opts); err != nil {
		return fail(err)
	}
	e.Server.Start()
	if !e.Server.ReadyForConnections(10 * time.Second) {
		return fail(fmt.Errorf("enginebench: server not ready"))
	}
	// The engine connects in-process, as edict serve does to its embedded
	// server; the application connects over TCP.
	if e.Engine, err = nats.Connect(e.Server.ClientURL(), nats.UserInfo(creds.User, creds.Password), nats.InProcessServer(e.Server)); err != nil {
		return fail(err)
	}
	if e.App, err = nats.Connect(e.Server.ClientURL()); err != nil {
		return fail(err)
	}
	if e.Store, err = store.Open(dir+"/engine", store.Config{Shards: 2}); err != nil {
		return fail(err)
	}
	if e.Svc, err = service.Start(context.Background(), e.Engine, service.Config{Store: e.Store, Admission: adm, TrustRequestInfo: true}); err != nil {
		return fail(err)
	}
	return e, nil
}

// Close stops everything Start started and removes the directory.
func (e *Env) Close() {
	if e.Svc != nil {
		_ = e.Svc.Close()
	}
	if e.App != nil {
		e.App.Close()
	}
	if e.Engine != nil {
		e.Engine.Close()
	}
	if e.Store != nil {
		_ = e.Store.Close()
	}
	if e.Server != nil {
		e.Server.Shutdown()
		e.Server.WaitForShutdown()
	}
	_ = os.RemoveAll(e.dir)
}

// request sends body and fails on a NATS error or an error reply.
func request(nc *nats.Conn, subject string, body []byte, hdr nats.Header) (code string, err error) {
	msg := &nats.Msg{Subject: subject, Data: body, Header: hdr}
	m, err := nc.RequestMsg(msg, timeout)
	if err != nil {
		return "", err
	}
	return m.Header.Get(protocol.HeaderErrorCode), nil
}

var interactive = nats.Header{"X-Resource-Priority": []string{"interactive"}}

// addEcho registers a bare micro echo endpoint on e's engine connection,
// on an edict.eg subject so its requests cross the same service import as
// the engine's: the baseline of NodeRead.
func addEcho(e *Env) (stop func(), err error) {
	svc, err := micro.AddService(e.Engine, micro.Config{Name: "edict-bench-echo", Version: "0.0.1"})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint("echo", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(r.Data()) }),
		micro.WithEndpointSubject("edict.eg.bench.echo")); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := e.Engine.Flush(); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return func() { _ = svc.Stop() }, nil
}

// NodeRead benchmarks a node_get round trip through the service against a
// bare micro echo endpoint on the same server. Each iteration times one
// echo and one node_get back to back, so machine load drifts affect both
// alike; it reports x-vs-micro-echo (target ≤ 2) and both latencies.
func NodeRead(b *testing.B) {
	defer serveGC()()
	e, err := Start(admission.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Store.NodePut(context.Background(), "bench", store.Node{ID: "n", Props: json.RawMessage(`{"v":1}`)}); err != nil {
		b.Fatal(err)
	}
	stop, err := addEcho(e)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	body := []byte(`{"id":"n"}`)
	for range 200 { // warm both paths
		if _, err := request(e.App, "edict.eg.bench.echo", body, interactive); err != nil {
			b.Fatal(err)
		}
		if _, err := request(e.App, "edict.eg.bench.node_get", body, interactive); err != nil {
			b.Fatal(err)
		}
	}
	var echo, node time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := request(e.App, "edict.eg.bench.echo", body, interactive); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		code, err := request(e.App, "edict.eg.bench.node_get", body, interactive)
		if err != nil || code != "" {
			b.Fatalf("node_get: %v %s", err, code)
		}
		echo += t1.Sub(t0)
		node += time.Since(t1)
	}
	b.ReportMetric(float64(node)/float64(max(echo, 1)), "x-vs-micro-echo")
	b.ReportMetric(float64(node.Nanoseconds())/float64(b.N), "node_get-ns")
	b.ReportMetric(float64(echo.Nanoseconds())/float64(b.N), "echo-ns")
}

// Flood is one shape of write flood for readsUnderFlood.
type Flood struct {
	// Graphs are the graphs the writers write; the interactive reads go to
	// Graphs[0].
	Graphs []string
	// WritersPerGraph is the number of concurrent writers on each graph.
	WritersPerGraph int
	// Backoff returns one writer's wait policy after a BUSY; it is reset
	// after every admitted write.
	Backoff func() backoff.BackOff
}

// FloodAdmission are the admission sizes of the flood benchmarks: small, so
// a flood saturates the gate on any machine.
var FloodAdmission = admission.Config{MaxInFlight: 8, PerGraph: 4, ReadReserved: 16}

// IngestFlood is the flood of ReadsUnderWriteFlood: on each of two graphs
// (__commons__ and ingest) two writers more than the per-graph cap, so the
// two graphs' writers hold every global permit and every per-graph permit
// of both graphs and the surplus writers are shed; each writer backs off
// exponentially after a BUSY (1 ms doubling to 32 ms, jittered, reset on
// success), as every retry curve in edict is.
var IngestFlood = Flood{
	Graphs:          []string{protocol.DefaultGraph, "ingest"},
	WritersPerGraph: FloodAdmission.PerGraph + 2,
	Backoff: func() backoff.BackOff {
		return backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(time.Millisecond),
			backoff.WithMultiplier(2),
			backoff.WithRandomizationFactor(0.5),
			backoff.WithMaxInterval(32*time.Millisecond),
			backoff.WithMaxElapsedTime(0),
		)
	},
}

// RetryStorm is the flood of ReadsUnderRetryStorm: 16 writers on
// __commons__ alone, each retrying 1 ms after every BUSY. Its admission
// state is the same as four writers' (the per-graph cap holds the rest
// out), but the shed writers turn into ~6 000 BUSY round trips a second of
// pure NATS traffic, which competes with the reads for the CPU before
// admission is even reached.
var RetryStorm = Flood{
	Graphs:          []string{protocol.DefaultGraph},
	WritersPerGraph: 16,
	Backoff:         func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) },
}

// ReadsUnderWriteFlood benchmarks interactive node_get round trips on
// __commons__ while IngestFlood saturates the gate. It reports reads-shed
// (target 0), writes-shed, reads-reserved-pct (the share of the reads that
// found the normal path full and took the reserved lane: the evidence that
// the flood saturates the gate), and p99-x-vs-idle: the reads' p99 under
// the flood over their p99 measured idle in the same run (target ≤ 2).
func ReadsUnderWriteFlood(b *testing.B) { readsUnderFlood(b, IngestFlood) }

// ReadsUnderRetryStorm is ReadsUnderWriteFlood under RetryStorm: the
// figures of a badly behaved ingest client, kept to show where the read
// tail goes when BUSY round trips load the CPU (BENCHMARKS.md).
func ReadsUnderRetryStorm(b *testing.B) { readsUnderFlood(b, RetryStorm) }

func readsUnderFlood(b *testing.B, fl Flood) {
	defer serveGC()()
	e, err := Start(FloodAdmission)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, g := range fl.Graphs {
		if _, err := e.Store.NodePut(context.Background(), g, store.Node{ID: "hot", Props: json.RawMessage(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
	readSubject := protocol.GraphPrefix + fl.Graphs[0] + ".node_get"
	body := []byte(`{"id":"hot"}`)
	read := func() (time.Duration, bool, error) {
		t0 := time.Now()
		code, err := request(e.App, readSubject, body, interactive)
		return time.Since(t0), code == "503", err
	}
	var idle []time.Duration
	idleCPU := cpuMeter()
	for range idleReads {
		d, _, err := read()
		if err != nil {
			b.Fatal(err)
		}
		idle = append(idle, d)
	}
	idleCores := idleCPU()

	// The flood comes from its own connection, as an ingestion process
	// would: the reads' connection is the interactive client's.
	ingest, err := nats.Connect(e.Server.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer ingest.Close()
	var writesShed, writesOK atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for gi, g := range fl.Graphs {
		for i := range fl.WritersPerGraph {
			wg.Go(func() {
				hdr := nats.Header{"X-Resource-Priority": []string{"background_ingestion"}}
				subject := protocol.GraphPrefix + g + ".node_put"
				wbody := fmt.Appendf(nil, `{"id":"w%d-%d","props":{"x":1}}`, gi, i)
				bo := fl.Backoff()
				for {
					select {
					case <-stop:
						return
					default:
					}
					code, err := request(ingest, subject, wbody, hdr)
					switch {
					case err != nil:
						return
					case code == "503":
						writesShed.Add(1)
						// BUSY means "retry with backoff".
						select {
						case <-stop:
							return
						case <-time.After(bo.NextBackOff()):
						}
					default:
						writesOK.Add(1)
						bo.Reset()
					}
				}
			})
		}
	}
	var flood []time.Duration
	var readsShed int
	reserved0, err := readLaneAdmitted(e.App)
	if err != nil {
		b.Fatal(err)
	}
	floodCPU := cpuMeter()
	b.ResetTimer()
	for b.Loop() {
		d, shed, err := read()
		if err != nil {
			b.Fatal(err)
		}
		if shed {
			readsShed++
		}
		flood = append(flood, d)
	}
	b.StopTimer()
	floodCores := floodCPU()
	reserved1, err := readLaneAdmitted(e.App)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(readsShed), "reads-shed")
	b.ReportMetric(float64(writesShed.Load()), "writes-shed")
	b.ReportMetric(float64(writesOK.Load()), "writes-ok")
	b.ReportMetric(100*float64(reserved1-reserved0)/float64(max(len(flood), 1)), "reads-reserved-pct")
	b.ReportMetric(float64(p99(flood))/float64(max(p99(idle), 1)), "p99-x-vs-idle")
	if idleCores > 0 {
		b.ReportMetric(idleCores, "idle-cpu-cores")
		b.ReportMetric(floodCores, "flood-cpu-cores")
	}
	b.ReportMetric(float64(p99(idle).Microseconds()), "idle-p99-µs")
	b.ReportMetric(float64(p99(flood).Microseconds()), "flood-p99-µs")
}

// readLaneAdmitted returns eg_node_get's reserved-lane admissions from
// $SRV.STATS.
func readLaneAdmitted(nc *nats.Conn) (int64, error) {
	m, err := nc.Request("$SRV.STATS."+protocol.ServiceName, nil, timeout)
	if err != nil {
		return 0, err
	}
	var st struct {
		Endpoints []struct {
			Name string               `json:"name"`
			Data service.EndpointData `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return 0, err
	}
	for _, ep := range st.Endpoints {
		if ep.Name == "eg_node_get" {
			return ep.Data.ReadLane, nil
		}
	}
	return 0, fmt.Errorf("enginebench: eg_node_get missing from $SRV.STATS")
}

// serveGC sets the collector to edict serve's daemon.GCPercent, unless GOGC
// is set, and returns the function that restores it: the benchmarks
// measure the daemon's process as it runs.
func serveGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(daemon.GCPercent)
	return func() { debug.SetGCPercent(old) }
}

// idleReads is the number of reads that measure the idle p99.
const idleReads = 5000

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

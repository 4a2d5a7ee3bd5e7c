package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/internal/daemon"
	"github.com/edictrt/edict/internal/daemon/embedded"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

// Sizes of TestMissionIngestFloodNeverShedsReads: small admission limits
// so a handful of concurrent writers saturate them.
const (
	missionMaxInFlight = 8
	// missionPerGraph is the whole pool: work requests share one
	// per-graph key, so the ingest worker's claims can hold every global
	// permit only when the per-graph cap does not stop them first.
	missionPerGraph     = missionMaxInFlight
	missionReadReserved = 8
	// missionReaders readers each keep one read outstanding. A read's
	// permit is released right after its reply is published, so a reader
	// can hold its previous read's lane slot for a moment while its next
	// read arrives: the lane sees at most a few per reader, well under
	// missionReadReserved, and never fills.
	missionReaders      = 2
	missionReadRounds   = 50 // reads per reader during the flood
	missionFlooders     = 24 // concurrent ingest writers
	missionPinnedWrites = 16
	missionPinnedRounds = 5
	missionIngestUser   = "ingest"
	missionIngestPass   = "ingest-secret"
)

// mission_ingestServer starts the two-account server edict serve embeds
// (package embedded) with one more application user, "ingest", whose
// principal the server reports as APP/ingest in Nats-Request-Info. It
// returns the client URL and the engine account's URL with credentials.
func mission_ingestServer(t *testing.T) (appURL, engineURL string) {
	t.Helper()
	opts, creds, err := embedded.Options(embedded.Config{Port: server.RANDOM_PORT, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var app *server.Account
	for _, u := range opts.Users {
		if u.Username == embedded.AppUser {
			app = u.Account
		}
	}
	if app == nil {
		t.Fatalf("no %s user in the embedded options", embedded.AppUser)
	}
	opts.Users = append(opts.Users, &server.User{Username: missionIngestUser, Password: missionIngestPass, Account: app})
	s := natstest.Run(t, opts)
	addr := s.Addr().(*net.TCPAddr)
	return s.ClientURL(), fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", creds.User, creds.Password, addr.Port)
}

// mission_call is one engine request and its outcome.
type mission_call struct {
	code string // Nats-Service-Error-Code, "" for success
	text string
	data []byte
	err  error // transport error
}

func (c mission_call) busy() bool { return c.code == "503" && strings.HasPrefix(c.text, "BUSY:") }

// mission_request sends body to subject with class in X-Resource-Priority
// and any extra headers.
func mission_request(ctx context.Context, nc *nats.Conn, subject, class, body string, extra map[string]string) mission_call {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if class != "" {
		m.Header.Set(priority.Header, class)
	}
	for k, v := range extra {
		m.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(ctx, missionRequest)
	defer cancel()
	r, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return mission_call{err: err}
	}
	return mission_call{code: r.Header.Get(micro.ErrorCodeHeader), text: r.Header.Get(micro.ErrorHeader), data: r.Data}
}

// mission_endpoints returns the engine's $SRV.STATS data by endpoint name
// (eg_<op>, work_<op>, admin_<op>).
func mission_endpoints(t *testing.T, ctx context.Context, nc *nats.Conn) map[string]service.EndpointData {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, missionRequest)
	defer cancel()
	r, err := nc.RequestWithContext(ctx, "$SRV.STATS."+protocol.ServiceName, nil)
	if err != nil {
		t.Fatalf("$SRV.STATS: %v", err)
	}
	var st micro.Stats
	if err := json.Unmarshal(r.Data, &st); err != nil {
		t.Fatalf("$SRV.STATS: %v: %s", err, r.Data)
	}
	out := map[string]service.EndpointData{}
	for _, ep := range st.Endpoints {
		var d service.EndpointData
		if len(ep.Data) > 0 && string(ep.Data) != "null" {
			if err := json.Unmarshal(ep.Data, &d); err != nil {
				t.Fatalf("%s data: %v: %s", ep.Name, err, ep.Data)
			}
		}
		out[ep.Name] = d
	}
	return out
}

// mission_shed sums an endpoint's sheds of class (all reasons).
func mission_shed(d service.EndpointData, class priority.Class) int64 {
	var n int64
	for _, v := range d.Shed[class.String()] {
		n += v
	}
	return n
}

// TestMissionIngestFloodNeverShedsReads runs the daemon against the
// embedded two-account server with an ingest user whose principal,
// APP/ingest, is held to background_ingestion by a ceiling. The identity
// is the Nats-Request-Info the server sets when a request crosses the
// service import. It shows:
//
//   - while the ingest principal floods graph writes past the admission
//     limits and writes are shed BUSY, no interactive read of the
//     application principal is ever shed;
//   - with the global pool held by the ingest worker's long-polling claims,
//     every write is shed and every read is admitted on the reserved read
//     lane (counted exactly);
//   - the ingest principal cannot raise its class by sending
//     X-Resource-Priority: interactive, nor take the application's identity
//     by writing its own Nats-Request-Info: its sheds, its in-flight claims
//     and the item it submits as interactive are all background_ingestion.
func TestMissionIngestFloodNeverShedsReads(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	appURL, engineURL := mission_ingestServer(t)
	trust := true
	mission_daemon(t, daemon.Config{
		NATSURL:          engineURL,
		TrustRequestInfo: &trust,
		Ceilings:         identity.Ceilings{"APP/" + missionIngestUser: priority.BackgroundIngestion},
		Admission:        admission.Config{MaxInFlight: missionMaxInFlight, PerGraph: missionPerGraph, ReadReserved: missionReadReserved},
	})
	app := mission_connect(t, appURL, nats.Name("mission app"))
	ingest := mission_connect(t, appURL, nats.UserInfo(missionIngestUser, missionIngestPass), nats.Name("mission ingest"))
	interactive := priority.Interactive.String()
	// What an ingest client would write to pass as the application: the
	// server replaces it when the request crosses the import.
	forged := map[string]string{protocol.HeaderRequestInfo: `{"acc":"APP","user":"app"}`}

	// The graph the application reads.
	const nodes = 10
	for i := range nodes {
		body := fmt.Sprintf(`{"id":"n%d","labels":["Doc"],"props":{"i":%d}}`, i, i)
		if c := mission_request(ctx, app, "edict.eg.__commons__.node_put", interactive, body, nil); c.err != nil || c.code != "" {
			t.Fatalf("seed node_put: %+v", c)
		}
		if i > 0 {
			body := fmt.Sprintf(`{"from":"n0","type":"has","to":"n%d"}`, i)
			if c := mission_request(ctx, app, "edict.eg.__commons__.edge_put", interactive, body, nil); c.err != nil || c.code != "" {
				t.Fatalf("seed edge_put: %+v", c)
			}
		}
	}
	reads := []struct{ op, body string }{
		{"node_get", `{"id":"n%d"}`},
		{"neighbors", `{"id":"n0","dir":"out","limit":%d}`},
		{"nodes_by_label", `{"label":"Doc","limit":%d}`},
	}
	read := func(i int) mission_call {
		r := reads[i%len(reads)]
		arg := i % nodes // a node id for node_get, a limit ≥ 1 for the others
		if r.op != "node_get" {
			arg++
		}
		return mission_request(ctx, app, "edict.eg.__commons__."+r.op, interactive, fmt.Sprintf(r.body, arg), nil)
	}

	// An item the ingest principal submits as interactive is queued as
	// background_ingestion.
	{
		ic, err := workitems.New(ingest, workitems.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ic.Submit(priority.With(ctx, priority.Interactive), workitems.Item{ID: "forged-interactive", Type: "conversation", Class: priority.Interactive}); err != nil {
			t.Fatal(err)
		}
		ac, err := workitems.New(app, workitems.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := ac.Claim(priority.With(ctx, priority.Interactive), workitems.ClaimRequest{Types: []string{"conversation"}})
		if err != nil || cl == nil {
			t.Fatalf("claim the ingest's item: %v %v", cl, err)
		}
		if cl.ID != "forged-interactive" || cl.Class != priority.BackgroundIngestion {
			t.Errorf("the ingest's interactive submit was queued as %s %v, want background_ingestion", cl.ID, cl.Class)
		}
		if err := cl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Phase 1: the ingest principal floods writes while the application
	// reads. The flood runs until every read is done and writes have been
	// shed.
	before := mission_endpoints(t, ctx, app)
	var (
		floodStop            = make(chan struct{})
		writesOK, writesShed atomic.Int64
		floodMu              sync.Mutex
		floodBad             []mission_call
		flood, readers       sync.WaitGroup
	)
	for w := range missionFlooders {
		flood.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-floodStop:
					return
				case <-ctx.Done():
					return
				default:
				}
				body := fmt.Sprintf(`{"id":"ingest-%d-%d","labels":["Chunk"],"props":{"w":%d}}`, w, i%50, w)
				c := mission_request(ctx, ingest, "edict.eg.__commons__.node_put", interactive, body, forged)
				switch {
				case c.busy():
					writesShed.Add(1)
				case c.err == nil && c.code == "":
					writesOK.Add(1)
				default:
					floodMu.Lock()
					floodBad = append(floodBad, c)
					floodMu.Unlock()
				}
			}
		})
	}
	stopFlood := sync.OnceFunc(func() { close(floodStop); flood.Wait() })
	defer stopFlood()
	readBad := make(chan mission_call, missionReaders*missionReadRounds)
	var readsDone atomic.Int64
	for r := range missionReaders {
		readers.Go(func() {
			for i := range missionReadRounds {
				c := read(r*missionReadRounds + i)
				if c.err != nil || c.code != "" {
					readBad <- c
				}
				readsDone.Add(1)
			}
		})
	}
	readers.Wait()
	// The flood has had every read's time to shed; if it has not shed yet,
	// it keeps going until it does (bounded by missionDeadline).
	mission_until(t, ctx, "a shed ingest write", func() bool { return writesShed.Load() > 0 })
	stopFlood()
	close(readBad)
	for c := range readBad {
		t.Errorf("interactive read during the flood: %+v", c)
	}
	if len(floodBad) != 0 {
		t.Errorf("%d flood writes neither succeeded nor were shed BUSY, first %+v", len(floodBad), floodBad[0])
	}
	after := mission_endpoints(t, ctx, app)
	t.Logf("flood: %d writes admitted, %d shed; %d reads, 0 shed; reserved-lane reads %d",
		writesOK.Load(), writesShed.Load(), readsDone.Load(), after["eg_node_get"].ReadLane+after["eg_neighbors"].ReadLane+after["eg_nodes_by_label"].ReadLane)
	put := after["eg_node_put"]
	if got := mission_shed(put, priority.BackgroundIngestion) - mission_shed(before["eg_node_put"], priority.BackgroundIngestion); got != writesShed.Load() {
		t.Errorf("node_put sheds of background_ingestion rose by %d, want every shed flood write (%d)", got, writesShed.Load())
	}
	for _, c := range []priority.Class{priority.Interactive, priority.Orchestration, priority.Hydration} {
		if n := mission_shed(put, c); n != 0 {
			t.Errorf("node_put shed %d %s writes: the ingest principal's class was not clamped", n, c)
		}
	}
	for _, r := range reads {
		if n := mission_shed(after["eg_"+r.op], priority.Interactive) + mission_shed(after["eg_"+r.op], priority.BackgroundIngestion); n != 0 {
			t.Errorf("%s shed %d reads", r.op, n)
		}
	}

	// Phase 2: the ingest worker's long-polling claims (writes) hold the
	// whole global pool. Every write is shed; every read takes the
	// reserved lane.
	var pins sync.WaitGroup
	pinDone := make(chan mission_call, missionMaxInFlight)
	pinCtx, stopPins := context.WithCancel(ctx)
	defer func() { stopPins(); pins.Wait() }()
	for i := range missionMaxInFlight {
		pins.Go(func() {
			// A pin shed because a permit of the flood is still being
			// released is sent again; once admitted it holds its permits
			// for its long poll.
			body := fmt.Sprintf(`{"worker":"ingest-pin-%d","types":["mission_pin"],"wait_ms":%d}`, i, (20 * time.Second).Milliseconds())
			for pinCtx.Err() == nil {
				c := mission_request(pinCtx, ingest, "edict.work.claim", interactive, body, forged)
				if !c.busy() {
					pinDone <- c
					return
				}
				time.Sleep(missionPoll)
			}
		})
	}
	mission_until(t, ctx, "the ingest claims holding the global pool", func() bool {
		return mission_endpoints(t, ctx, app)["work_claim"].InFlight[priority.BackgroundIngestion.String()] == missionMaxInFlight
	})
	pinned := mission_endpoints(t, ctx, app)
	if n := pinned["work_claim"].InFlight[interactive]; n != 0 {
		t.Errorf("%d claims in flight as interactive: the ingest principal's class was not clamped", n)
	}
	for i := range missionPinnedWrites {
		body := fmt.Sprintf(`{"id":"pinned-%d","labels":["Chunk"]}`, i)
		if c := mission_request(ctx, ingest, "edict.eg.__commons__.node_put", interactive, body, forged); !c.busy() {
			t.Errorf("ingest write %d with the pool held: %+v, want BUSY", i, c)
		}
	}
	if c := mission_request(ctx, app, "edict.eg.__commons__.node_put", interactive, `{"id":"app-write"}`, nil); !c.busy() || c.text != protocol.BusyCapacity {
		t.Errorf("an interactive write with the pool held: %+v, want %q (writes never take the read lane)", c, protocol.BusyCapacity)
	}
	var pinnedReads sync.WaitGroup
	pinnedBad := make(chan mission_call, missionReaders*missionPinnedRounds)
	for r := range missionReaders {
		pinnedReads.Go(func() {
			for i := range missionPinnedRounds {
				if c := read(r*missionPinnedRounds + i); c.err != nil || c.code != "" {
					pinnedBad <- c
				}
			}
		})
	}
	pinnedReads.Wait()
	close(pinnedBad)
	for c := range pinnedBad {
		t.Errorf("interactive read with the pool held: %+v", c)
	}
	held := mission_endpoints(t, ctx, app)
	if n := held["work_claim"].InFlight[priority.BackgroundIngestion.String()]; n != missionMaxInFlight {
		t.Fatalf("the pins let go during the phase (%d in flight): its counts prove nothing", n)
	}
	select {
	case c := <-pinDone:
		t.Fatalf("a pinned claim answered during the phase: %+v", c)
	default:
	}
	var lane int64
	for _, r := range reads {
		lane += held["eg_"+r.op].ReadLane - pinned["eg_"+r.op].ReadLane
	}
	if want := int64(missionReaders * missionPinnedRounds); lane != want {
		t.Errorf("%d reads admitted on the reserved lane with the pool held, want all %d", lane, want)
	}
	if got := mission_shed(held["eg_node_put"], priority.BackgroundIngestion) - mission_shed(pinned["eg_node_put"], priority.BackgroundIngestion); got != missionPinnedWrites {
		t.Errorf("ingest writes shed as background_ingestion with the pool held: %d, want %d", got, missionPinnedWrites)
	}
	if got := mission_shed(held["eg_node_put"], priority.Interactive); got != 1 {
		t.Errorf("interactive node_put sheds: %d, want only the application's own write (1)", got)
	}
	t.Logf("pinned: %d claims held the pool; %d ingest writes and 1 application write shed; %d reads on the reserved lane",
		missionMaxInFlight, missionPinnedWrites, lane)
	// The pins end when the test does: the daemon's drain cancels them.
}

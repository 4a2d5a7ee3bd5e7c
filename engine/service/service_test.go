package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/priority"
)

func TestGraphRoundTrip(t *testing.T) {
	e := startEngine(t, service.Config{}, 0)
	g := "edict.eg.g1."
	steps := []struct {
		op   string
		body string
		want string // JSON the reply must equal
	}{
		{"graph_create", `{"type":"Team"}`, `{"created":true}`},
		{"node_put", `{"id":"a","labels":["L"],"props":{"x":1}}`, `{"version":1}`},
		{"node_create", `{"id":"a","labels":[],"props":{}}`, `{"created":false,"version":1}`},
		{"node_create", `{"id":"b","labels":["L"],"props":{"y":2}}`, `{"created":true,"version":1}`},
		{"node_get", `{"id":"a"}`, `{"id":"a","labels":["L"],"props":{"x":1},"version":1}`},
		{"node_cas", `{"id":"a","if":{"x":2},"set":{"x":3}}`, `{"swapped":false,"version":1}`},
		{"node_cas", `{"id":"a","if":{"x":1},"set":{"x":3}}`, `{"swapped":true,"version":2}`},
		{"edge_put", `{"from":"a","type":"knows","to":"b"}`, `{}`},
		{"edge_get", `{"from":"a","type":"knows","to":"b"}`, `{"from":"a","type":"knows","to":"b","props":{}}`},
		{"neighbors", `{"id":"b","dir":"in"}`, `{"edges":[{"from":"a","type":"knows","to":"b","props":{}}]}`},
		{"traverse", `{"from":"a","depth":2}`, `{"nodes":["a","b"]}`},
		{"nodes_by_label", `{"label":"L","limit":1}`, `{"nodes":[{"id":"a","labels":["L"],"props":{"x":3},"version":2}],"next":"a"}`},
		{"kv_put", `{"ns":"n","key":"k","value":"dmFs"}`, `{}`},
		{"kv_get", `{"ns":"n","key":"k"}`, `{"value":"dmFs"}`},
		{"kv_cas", `{"ns":"n","key":"k","expected":"dmFs","new":"bmV3"}`, `{"swapped":true}`},
		{"kv_cas", `{"ns":"n","key":"k2"}`, `{"swapped":true}`},
		{"kv_scan", `{"ns":"n","prefix":"k"}`, `{"items":[{"key":"k","value":"bmV3"}]}`},
		{"batch", `{"ops":[{"op":"node_put","id":"c","labels":[],"props":{}},{"op":"kv_delete","ns":"n","key":"k"}]}`, `{"results":[{"version":1},{"deleted":true}]}`},
		{"edge_delete", `{"from":"a","type":"knows","to":"b"}`, `{"deleted":true}`},
		{"node_delete", `{"id":"a"}`, `{"deleted":true}`},
		{"kv_delete", `{"ns":"n","key":"k"}`, `{"deleted":false}`},
	}
	for _, s := range steps {
		r := mustCall(t, e.app, g+s.op, s.body, nil)
		if r.code != 0 {
			t.Fatalf("%s %s: %d %s", s.op, s.body, r.code, r.text)
		}
		if !jsonEqual(t, r.data, []byte(s.want)) {
			t.Fatalf("%s %s = %s, want %s", s.op, s.body, r.data, s.want)
		}
	}
	if r := mustCall(t, e.app, g+"node_get", `{"id":"a"}`, nil); r.code != 404 {
		t.Fatalf("deleted node_get = %d %s, want 404", r.code, r.text)
	}
	var list struct{ Graphs []string }
	mustCall(t, e.app, "edict.admin.graph_list", nil, nil).decode(t, &list)
	if !slices.Contains(list.Graphs, "g1") {
		t.Fatalf("graph_list = %v, want g1", list.Graphs)
	}
	var layout struct {
		Shards int
		Files  []string
	}
	mustCall(t, e.app, "edict.admin.layout", "{}", nil).decode(t, &layout)
	if layout.Shards != 2 || len(layout.Files) != 2 {
		t.Fatalf("layout = %+v", layout)
	}
	if r := mustCall(t, e.app, g+"graph_delete", "{}", nil); !jsonEqual(t, r.data, []byte(`{"deleted":true}`)) {
		t.Fatalf("graph_delete = %d %s %s", r.code, r.text, r.data)
	}
}

func TestKVNamespacesAreScopedPerPrincipal(t *testing.T) {
	e := startEngine(t, service.Config{}, 0)
	mustCall(t, e.app, "edict.eg.g.kv_put", `{"ns":"n","key":"k","value":"dg=="}`, nil)
	// The engine account's own connection is a different principal
	// (anonymous: no Nats-Request-Info crosses an import).
	if r := mustCall(t, e.eng, "edict.eg.g.kv_get", `{"ns":"n","key":"k"}`, nil); r.code != 404 {
		t.Fatalf("another principal read the key: %d %s", r.code, r.data)
	}
	if r := mustCall(t, e.app, "edict.eg.g.kv_get", `{"ns":"n","key":"k"}`, nil); r.code != 0 {
		t.Fatalf("owner kv_get: %d %s", r.code, r.text)
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("reply %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("want %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestBadRequestsChangeNothing(t *testing.T) {
	e := startEngine(t, service.Config{}, 0)
	long := strings.Repeat("x", 600)
	tests := []struct {
		name    string
		subject string
		body    string
		hdr     map[string]string
		code    int
	}{
		{"malformed JSON", "edict.eg.g.node_put", `{"id":`, nil, 400},
		{"trailing data", "edict.eg.g.node_put", `{"id":"a"} {}`, nil, 400},
		{"unknown field", "edict.eg.g.node_put", `{"id":"a","colour":"red"}`, nil, 400},
		{"unknown field in a batch op", "edict.eg.g.batch", `{"ops":[{"op":"node_put","id":"a","bogus":1}]}`, nil, 400},
		{"unknown batch op", "edict.eg.g.batch", `{"ops":[{"op":"node_put","id":"a"},{"op":"explode"}]}`, nil, 400},
		{"bad graph name", "edict.eg.g$x.node_put", `{"id":"a"}`, nil, 400},
		{"graph name too long", "edict.eg." + strings.Repeat("g", 129) + ".node_put", `{"id":"a"}`, nil, 400},
		{"unknown class", "edict.eg.g.node_put", `{"id":"a"}`, map[string]string{"X-Resource-Priority": "urgent"}, 400},
		{"empty id", "edict.eg.g.node_put", `{"id":""}`, nil, 400},
		{"props not an object", "edict.eg.g.node_put", `{"id":"a","props":[1]}`, nil, 400},
		{"bad dir", "edict.eg.g.neighbors", `{"id":"a","dir":"up"}`, nil, 400},
		{"bad graph type", "edict.eg.g.graph_create", `{"type":"Planet"}`, nil, 400},
		{"id over its limit", "edict.eg.g.node_put", `{"id":"` + long + `"}`, nil, 413},
		{"ns over its limit", "edict.eg.g.kv_put", `{"ns":"` + long + `","key":"k","value":""}`, nil, 413},
		{"admin bad graph", "edict.admin.catalog_get", `{"graph":"a.b"}`, nil, 400},
		{"work body not JSON", "edict.work.submit", `nope`, nil, 500}, // no work handler configured
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustCall(t, e.app, tt.subject, tt.body, tt.hdr)
			if r.code != tt.code {
				t.Fatalf("code = %d (%s), want %d", r.code, r.text, tt.code)
			}
			if r.text == "" {
				t.Fatal("error without Nats-Service-Error text")
			}
		})
	}
	// Unknown op and a graph token with a dot reach no endpoint.
	for _, subj := range []string{"edict.eg.g.node_frobnicate", "edict.eg.a.b.node_get", "edict.admin.drop_everything", "edict.work.cancel"} {
		if _, err := call(e.app, subj, `{}`, nil); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("%s: err = %v, want no responders", subj, err)
		}
	}
	// A body over max_payload never leaves the client.
	big := `{"id":"a","props":{"x":"` + strings.Repeat("y", int(e.app.MaxPayload())) + `"}}`
	if _, err := call(e.app, "edict.eg.g.node_put", big, nil); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("oversized body: err = %v, want nats.ErrMaxPayload", err)
	}
	// Nothing was stored.
	var list struct{ Graphs []string }
	mustCall(t, e.app, "edict.admin.graph_list", nil, nil).decode(t, &list)
	if len(list.Graphs) != 0 {
		t.Fatalf("bad requests created graphs %v", list.Graphs)
	}
	var st struct{ Nodes, Edges uint64 }
	mustCall(t, e.app, "edict.eg.g.stats", nil, nil).decode(t, &st)
	if st.Nodes != 0 || st.Edges != 0 {
		t.Fatalf("bad requests stored %+v", st)
	}
	// The service still answers.
	if r := mustCall(t, e.app, "edict.eg.g.node_put", `{"id":"ok"}`, nil); r.code != 0 {
		t.Fatalf("service broken after bad requests: %d %s", r.code, r.text)
	}
}

func TestReplyOverMaxPayloadIs413(t *testing.T) {
	e := startEngine(t, service.Config{}, 16<<10)
	pad := strings.Repeat("p", 4<<10)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if r := mustCall(t, e.app, "edict.eg.g.node_put", `{"id":"`+id+`","labels":["L"],"props":{"pad":"`+pad+`"}}`, nil); r.code != 0 {
			t.Fatalf("put %s: %d %s", id, r.code, r.text)
		}
	}
	r := mustCall(t, e.app, "edict.eg.g.nodes_by_label", `{"label":"L"}`, nil)
	if r.code != 413 || r.text != service.TooLargeReplyText {
		t.Fatalf("big reply = %d %q, want 413 %q", r.code, r.text, service.TooLargeReplyText)
	}
}

func TestSRVInfoListsEveryEndpoint(t *testing.T) {
	e := startEngine(t, service.Config{}, 0)
	m, err := e.app.Request("$SRV.INFO."+protocol.ServiceName, nil, requestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ep := range info.Endpoints {
		if _, dup := got[ep.Name]; dup {
			t.Fatalf("duplicate endpoint name %s", ep.Name)
		}
		got[ep.Name] = ep.Subject
	}
	want := map[string]string{}
	for _, op := range service.GraphOps {
		want["eg_"+op] = "edict.eg.*." + op
	}
	for _, op := range service.WorkOps {
		want["work_"+op] = "edict.work." + op
	}
	for _, op := range service.AdminOps {
		want["admin_"+op] = "edict.admin." + op
	}
	if len(got) != len(want) {
		t.Fatalf("%d endpoints, want %d: %v", len(got), len(want), got)
	}
	subjects := map[string]bool{}
	for name, subj := range want {
		if got[name] != subj {
			t.Errorf("endpoint %s on %q, want %q", name, got[name], subj)
		}
		if subjects[subj] {
			t.Errorf("subject %s used twice", subj)
		}
		subjects[subj] = true
	}
	if info.Name != protocol.ServiceName {
		t.Fatalf("service name %q", info.Name)
	}
}

func TestClampingCannotBeBypassedByHeaders(t *testing.T) {
	e := startEngine(t, service.Config{
		Work:     echoWork{},
		Ceilings: identity.Ceilings{"APP/app": priority.BackgroundIngestion},
	}, 0)
	tests := []struct {
		name string
		hdr  map[string]string
	}{
		{"asks for interactive", map[string]string{"X-Resource-Priority": "interactive"}},
		{"other spelling", map[string]string{"x-resource-priority": " INTERACTIVE "}},
		{"forged request info", map[string]string{"X-Resource-Priority": "interactive", "Nats-Request-Info": `{"acc":"APP","user":"ui"}`}},
		{"forged engine identity", map[string]string{"X-Resource-Priority": "interactive", "Nats-Request-Info": `{"acc":"ENGINE","user":"engine"}`, "nats-request-info": `{"acc":"ENGINE"}`}},
		{"baggage", map[string]string{"baggage": "edict.priority=interactive"}},
		{"no header", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got map[string]string
			mustCall(t, e.app, "edict.work.submit", `{}`, tt.hdr).decode(t, &got)
			if got["principal"] != "APP/app" || got["class"] != "background_ingestion" || got["ctx_class"] != "background_ingestion" {
				t.Fatalf("caller = %v, want APP/app at background_ingestion", got)
			}
		})
	}
	// A read by the clamped principal is admitted at its clamped class too.
	var got map[string]string
	mustCall(t, e.app, "edict.work.stats", nil, map[string]string{"X-Resource-Priority": "interactive"}).decode(t, &got)
	if got["class"] != "background_ingestion" {
		t.Fatalf("stats caller %v", got)
	}
}

func TestUnclampedPrincipalKeepsItsClass(t *testing.T) {
	e := startEngine(t, service.Config{Work: echoWork{}, Ceilings: identity.Ceilings{"APP/other": priority.Hydration}}, 0)
	var got map[string]string
	mustCall(t, e.app, "edict.work.submit", `{}`, map[string]string{"X-Resource-Priority": "interactive"}).decode(t, &got)
	if got["principal"] != "APP/app" || got["class"] != "interactive" {
		t.Fatalf("caller = %v", got)
	}
}

func TestDispatchDeadlineReleasesPermits(t *testing.T) {
	w := echoWork{release: make(chan struct{})}
	e := startEngine(t, service.Config{
		Work:             w,
		DispatchDeadline: 50 * time.Millisecond,
		Admission:        admission.Config{MaxInFlight: 1, PerGraph: 1, ReadReserved: 1},
	}, 0)
	defer close(w.release) // unstick the handlers before shutdown
	for i := range 3 {
		// "block" ignores ctx: only the deadline frees its permit, so with
		// MaxInFlight 1 a second request is admitted only if it was freed.
		r := mustCall(t, e.app, "edict.work.block", `{}`, nil)
		if r.code != 504 || r.text != service.TimeoutText {
			t.Fatalf("request %d = %d %q, want 504 %q", i, r.code, r.text, service.TimeoutText)
		}
	}
	r := mustCall(t, e.app, "edict.work.wait", `{}`, nil)
	if r.code != 504 {
		t.Fatalf("wait = %d %q, want 504", r.code, r.text)
	}
}

func TestQoSQuotaShedsWithItsText(t *testing.T) {
	w := echoWork{release: make(chan struct{}), started: make(chan struct{}, 1)}
	e := startEngine(t, service.Config{
		Work:      w,
		QoS:       admission.QoSConfig{Enabled: true, PrincipalQuota: 1},
		Admission: admission.Config{MaxInFlight: 8},
	}, 0)
	first := make(chan reply, 1)
	go func() {
		r, _ := call(e.app, "edict.work.block", `{}`, nil)
		first <- r
	}()
	select {
	case <-w.started: // the first request holds the principal's quota
	case <-time.After(requestTimeout):
		t.Fatal("blocking request not started within the request timeout")
	}
	r := mustCall(t, e.app, "edict.work.submit", `{}`, nil)
	close(w.release)
	if r.code != 503 || r.text != admission.ReasonQuota.Text() {
		t.Fatalf("second request = %d %q, want 503 %q", r.code, r.text, admission.ReasonQuota.Text())
	}
	if got := <-first; got.code != 0 {
		t.Fatalf("first request = %d %s", got.code, got.text)
	}
	// The quota is free again.
	if r := mustCall(t, e.app, "edict.work.submit", `{}`, nil); r.code != 0 {
		t.Fatalf("after release = %d %s", r.code, r.text)
	}
}

// Under a flood of concurrent writers on __commons__ with small limits,
// writes are shed and no read is.
func TestWriteFloodShedsNoReads(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	const writers, readers, writesEach = 48, 4, 20
	e := startEngine(t, service.Config{
		MeterProvider: mp,
		// Each reader holds at most 2 lane permits (a reply is published
		// before its permit is released), so 2*readers never fills the lane.
		Admission: admission.Config{MaxInFlight: 4, PerGraph: 2, ReadReserved: 2 * readers},
	}, 0)
	g := "edict.eg.__commons__."
	mustCall(t, e.app, g+"node_put", `{"id":"hot","props":{"v":0}}`, nil)
	var writesShed, writesOK, readsShed, readsOK atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			for j := range writesEach {
				r, err := call(e.app, g+"node_put", map[string]any{"id": "w", "props": map[string]int{"i": i, "j": j}},
					map[string]string{"X-Resource-Priority": "background_ingestion"})
				switch {
				case err != nil:
					t.Errorf("write: %v", err)
					return
				case r.code == 503:
					writesShed.Add(1)
				case r.code == 0:
					writesOK.Add(1)
				default:
					t.Errorf("write: %d %s", r.code, r.text)
				}
			}
		})
	}
	var rg sync.WaitGroup
	for range readers {
		rg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					if n > 20 {
						return
					}
				default:
				}
				r, err := call(e.app, g+"node_get", `{"id":"hot"}`, map[string]string{"X-Resource-Priority": "interactive"})
				switch {
				case err != nil:
					t.Errorf("read: %v", err)
					return
				case r.code == 0:
					readsOK.Add(1)
				default:
					readsShed.Add(1)
					t.Errorf("read shed: %d %s", r.code, r.text)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	t.Logf("writes ok %d shed %d; reads ok %d shed %d", writesOK.Load(), writesShed.Load(), readsOK.Load(), readsShed.Load())
	if readsShed.Load() != 0 {
		t.Fatalf("%d reads shed under the write flood", readsShed.Load())
	}
	if writesShed.Load() == 0 {
		t.Fatal("the flood shed no write: it did not saturate the gate, so the test proved nothing")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	busy := sumCounter(rm, "edict_engine_busy_rejections_total", map[string]string{"class": "background_ingestion", "reason": "capacity"})
	if busy != writesShed.Load() {
		t.Fatalf("busy_rejections_total{background_ingestion,capacity} = %d, want %d", busy, writesShed.Load())
	}
	if n := sumCounter(rm, "edict_engine_busy_rejections_total", map[string]string{"class": "interactive"}); n != 0 {
		t.Fatalf("interactive busy rejections = %d", n)
	}
	if n := sumCounter(rm, "edict_engine_requests_total", map[string]string{"op": "node_get"}); n != readsOK.Load() {
		t.Fatalf("requests_total{node_get} = %d, want %d", n, readsOK.Load())
	}
}

// sumCounter sums the int64 sum metric name over points whose attributes
// include want.
func sumCounter(rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
		points:
			for _, p := range sum.DataPoints {
				for k, v := range want {
					if got, _ := p.Attributes.Value(attributeKey(k)); got.AsString() != v {
						continue points
					}
				}
				n += p.Value
			}
		}
	}
	return n
}

func TestAuthenticationRequiredUnderQoS(t *testing.T) {
	e := startEngine(t, service.Config{Work: echoWork{}, QoS: admission.QoSConfig{Enabled: true}}, 0)
	// Inside the engine's own account nothing crosses an import, so the
	// header arrives as written: a trusted header that names no account.
	for _, ri := range []string{`{`, `{"user":"x"}`} {
		r := mustCall(t, e.eng, "edict.work.submit", `{}`, map[string]string{"Nats-Request-Info": ri})
		if r.code != 403 || r.text != "AUTHENTICATION_REQUIRED: authenticated principal is required for admission" {
			t.Fatalf("request info %s: %d %q, want 403 AUTHENTICATION_REQUIRED", ri, r.code, r.text)
		}
	}
	// Without the header the caller is anonymous, a principal like any other.
	var got map[string]string
	mustCall(t, e.eng, "edict.work.submit", `{}`, nil).decode(t, &got)
	if got["principal"] != "anonymous" {
		t.Fatalf("caller %v, want anonymous", got)
	}
}

func TestAccessDenied(t *testing.T) {
	e := startEngine(t, service.Config{Access: service.Access{"APP/app": {"g": service.Read, "own": service.Write}}}, 0)
	r := mustCall(t, e.app, "edict.eg.g.node_put", `{"id":"a"}`, nil)
	if r.code != 403 || r.text != "ACCESS_DENIED: agent 'APP/app' lacks Write access to graph 'g'" {
		t.Fatalf("write on a read grant = %d %q", r.code, r.text)
	}
	if r := mustCall(t, e.app, "edict.eg.g.node_get", `{"id":"a"}`, nil); r.code != 404 {
		t.Fatalf("read on a read grant = %d %q, want 404 (allowed, absent)", r.code, r.text)
	}
	if r := mustCall(t, e.app, "edict.eg.other.node_get", `{"id":"a"}`, nil); r.code != 403 {
		t.Fatalf("read without a grant = %d %q, want 403", r.code, r.text)
	}
	if r := mustCall(t, e.app, "edict.eg.own.node_put", `{"id":"a"}`, nil); r.code != 0 {
		t.Fatalf("write on a write grant = %d %q", r.code, r.text)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	w := echoWork{release: make(chan struct{}), started: make(chan struct{}, 1), blocked: new(atomic.Int32)}
	e := startEngine(t, service.Config{Work: w}, 0)
	first := make(chan reply, 1)
	go func() {
		r, _ := call(e.app, "edict.work.block", `{}`, nil)
		first <- r
	}()
	select {
	case <-w.started:
	case <-time.After(requestTimeout):
		t.Fatal("blocking request not started within the request timeout")
	}
	shut := make(chan error, 1)
	go func() { shut <- e.svc.Shutdown(t.Context()) }()
	close(w.release)
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// Shutdown returns only after the in-flight request's goroutine did.
	if n := w.blocked.Load(); n != 1 {
		t.Fatalf("Shutdown returned before the in-flight request finished (%d finished)", n)
	}
	if r := <-first; r.code != 0 {
		t.Fatalf("drained request = %d %s", r.code, r.text)
	}
	if _, err := call(e.app, "edict.work.submit", `{}`, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("after shutdown err = %v, want no responders", err)
	}
}

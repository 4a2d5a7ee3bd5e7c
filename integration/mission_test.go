package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/sync/errgroup"

	"github.com/edictrt/edict/internal/daemon"
	"github.com/edictrt/edict/llmgate"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/scheduler"
	"github.com/edictrt/edict/workitems"
)

// Sizes of TestMissionInteractiveFirstUnderIngestion.
const (
	missionBackground  = 1500 // background items queued before the pool starts
	missionWave1       = 3    // interactive items submitted while background saturates the LLM
	missionWave2       = 5    // interactive items submitted mid-flood, the LLM flowing
	missionWorkers     = 4    // pool workers (one is the interactive floor)
	missionLLMCapacity = 3    // the LLM gate's capacity
	missionLLMReserve  = 1    // slots background may never take
	missionModel       = "mission-llm"
	missionBgType      = "document"     // ingestion lane: background_ingestion
	missionHighType    = "conversation" // queries lane: interactive
)

// mission_run is one run of a task handler as the handler saw it.
type mission_run struct {
	ID    string
	Type  string
	Class priority.Class // priority.From(ctx) in the handler
	// BgBefore is the number of background handler starts before this one.
	BgBefore int64
	// For interactive runs: the LLM gate and the engine's background
	// queue when the handler started (right after the claim).
	Gate     llmgate.Stats
	BgQueued int
	Err      error
	Done     bool
}

// mission_ledger records every handler run.
type mission_ledger struct {
	mu     sync.Mutex
	runs   map[string][]*mission_run
	done   int // distinct items whose handler returned nil
	target int
	all    chan struct{} // closed when done reaches target
	wave   map[string]chan struct{}
	waveN  map[string]int
}

func (l *mission_ledger) start(r *mission_run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[r.ID] = append(l.runs[r.ID], r)
}

func (l *mission_ledger) finish(r *mission_run, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Err, r.Done = err, true
	if err != nil {
		return
	}
	ok := 0
	for _, x := range l.runs[r.ID] {
		if x.Done && x.Err == nil {
			ok++
		}
	}
	if ok != 1 {
		return // a second successful run is reported at the end
	}
	l.done++
	if l.done == l.target {
		close(l.all)
	}
	prefix, _, _ := strings.Cut(r.ID, "-")
	if ch, found := l.wave[prefix]; found {
		l.waveN[prefix]--
		if l.waveN[prefix] == 0 {
			close(ch)
		}
	}
}

// TestMissionInteractiveFirstUnderIngestion runs the whole stack in one
// process: the daemon (embedded two-account NATS, JetStream and the graph
// store on a temp dir), a scheduler.Pool over the workitems client working
// a backlog of background items, whose handlers call a fake OpenAI-style
// LLM through one llmgate.Transport with a small gate. It shows, with
// orderings and counts only:
//
//   - while background calls fill the gate's ceiling and more wait at the
//     gate, every interactive item submitted then is claimed with the
//     background backlog still queued, and its model call is admitted at
//     once: it never waits, and reaches the server beside the background
//     calls holding the ceiling;
//   - a high call that must wait (the gate full) gets the next free slot
//     although background callers waited longer: no background call is
//     granted while a high call waits;
//   - interactive items submitted mid-flood, the LLM flowing, are claimed
//     ahead of the backlog: between their submits and their last claim at
//     most Workers+1 background tasks start (those already claimed, one
//     per worker, and the one claim under way);
//   - every item runs exactly once and is acknowledged, none is lost, and
//     every task ran under its class, which reached the LLM as the vLLM
//     "priority" field.
func TestMissionInteractiveFirstUnderIngestion(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	info := mission_daemon(t, daemon.Config{})
	nc := mission_connect(t, info.NATSURL, nats.Name("mission app"))
	wc, err := workitems.New(nc, workitems.Config{})
	if err != nil {
		t.Fatal(err)
	}

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	llm := mission_newLLM(t)
	reg := llmgate.NewRegistry(llmgate.Config{Reserve: missionLLMReserve, SlowWait: -1, MeterProvider: mp, TracerProvider: tp})
	gate := reg.Gate(missionModel, missionLLMCapacity)
	llm.gate = gate
	ceiling := gate.Capacity() - gate.Reserve()
	if ceiling != missionLLMCapacity-missionLLMReserve || ceiling < 2 {
		t.Fatalf("gate capacity %d reserve %d", gate.Capacity(), gate.Reserve())
	}
	base := llm.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	ai := openai.NewClient(
		option.WithBaseURL(llm.URL+"/v1/"),
		option.WithAPIKey("mission"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &llmgate.Transport{
			Base: base, Registry: reg, SendPriority: true,
			Capacities: map[string]int{missionModel: missionLLMCapacity},
		}}),
	)
	complete := func(ctx context.Context, content string) error {
		_, err := ai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    missionModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
		})
		return err
	}

	// The backlog, queued before any worker runs.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range missionBackground {
		g.Go(func() error {
			_, err := wc.Submit(gctx, workitems.Item{ID: fmt.Sprintf("bg-%04d", i), Type: missionBgType,
				Payload: json.RawMessage(fmt.Sprintf(`{"doc":%d}`, i))})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("submit backlog: %v", err)
	}

	total := missionBackground + missionWave1 + missionWave2
	led := &mission_ledger{
		runs: map[string][]*mission_run{}, target: total, all: make(chan struct{}),
		wave:  map[string]chan struct{}{"w1": make(chan struct{}), "w2": make(chan struct{})},
		waveN: map[string]int{"w1": missionWave1, "w2": missionWave2},
	}
	var bgStarted atomic.Int64
	const pinAt = 20 // background starts before the LLM is saturated
	reachedPin := make(chan struct{})
	var wave2At atomic.Int64 // background starts that open wave 2 (set later)
	wave2At.Store(-1)
	reachedWave2 := make(chan struct{})
	handler := func(ctx context.Context, task *scheduler.Task) error {
		r := &mission_run{ID: task.ID, Type: task.Type, Class: priority.From(ctx)}
		if task.Type == missionBgType {
			r.BgBefore = bgStarted.Add(1) - 1
			switch r.BgBefore + 1 {
			case pinAt:
				close(reachedPin)
			case wave2At.Load():
				close(reachedWave2)
			}
		} else {
			r.BgBefore = bgStarted.Load()
			if strings.HasPrefix(task.ID, "w1-") {
				// Wave 1 runs while background holds the gate's
				// ceiling: no admission can run beside this snapshot
				// (see mission_gateStats).
				r.Gate = mission_gateStats(gate)
			}
			st, err := wc.Stats(ctx)
			if err != nil {
				return err
			}
			r.BgQueued = st.Classes[priority.BackgroundIngestion.String()].Queued
		}
		led.start(r)
		err := complete(ctx, task.ID)
		led.finish(r, err)
		return err
	}

	logs := mission_newLogCounter()
	pool, err := scheduler.NewPool(scheduler.PoolConfig{
		Workers: missionWorkers,
		Claimer: wc,
		// PerLaneMin 0: no lane steering, so the only denials are the
		// interactive floor's (each costs a 5 s defer, no attempt).
		Policy:         scheduler.NewPolicy(scheduler.PolicyConfig{Workers: missionWorkers, Reserved: 1, PerLaneMin: 0}, scheduler.NewRegistry()),
		Handler:        handler,
		WorkerID:       "mission",
		Rand:           func() float64 { return 0 },
		Logger:         slog.New(logs),
		TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	poolCtx, stopPool := context.WithCancel(ctx)
	poolDone := make(chan error, 1)
	go func() { poolDone <- pool.Run(poolCtx) }()
	defer func() {
		stopPool()
		llm.release(-1, false)
		<-poolDone
	}()

	// Saturate the LLM: from the pin on, the fake server holds every
	// background call, so background fills its ceiling and the next
	// background worker waits at the gate.
	mission_wait(t, ctx, fmt.Sprintf("%d background starts", pinAt), reachedPin)
	llm.pin()
	llm.await(t, ctx, "background filling the gate's ceiling", func(s *mission_llm) bool {
		_, bg := s.heldCount()
		return bg == ceiling
	})
	mission_until(t, ctx, "a background caller waiting at the gate", func() bool {
		return mission_gateStats(gate).Waiting.Of(priority.BackgroundIngestion) >= 1
	})

	// Wave 1: interactive items while the LLM is saturated.
	for i := range missionWave1 {
		if _, err := wc.Submit(ctx, workitems.Item{ID: fmt.Sprintf("w1-%d", i), Type: missionHighType}); err != nil {
			t.Fatal(err)
		}
	}
	mission_wait(t, ctx, "wave 1 done", led.wave["w1"])

	// A high call that has to wait: the gate is full (ceiling background
	// held plus one held orchestration call), background callers are
	// waiting, then one background call ends. The slot must go to the
	// high caller.
	var direct sync.WaitGroup
	directErr := make(chan error, 2)
	defer func() {
		llm.release(-1, false)
		direct.Wait()
	}()
	direct.Go(func() { directErr <- complete(ctx, "hold:o1") })
	llm.await(t, ctx, "the held orchestration call at the server", func(s *mission_llm) bool {
		all, bg := s.heldCount()
		return all-bg == 1
	})
	direct.Go(func() { directErr <- complete(ctx, "o2") })
	mission_until(t, ctx, "an orchestration caller waiting at the full gate", func() bool {
		return mission_gateStats(gate).Waiting.Of(priority.Orchestration) == 1
	})
	if st := mission_gateStats(gate); st.Waiting.Of(priority.BackgroundIngestion) < 1 || st.InFlight != gate.Capacity() {
		t.Fatalf("gate before the hand-off: %+v, want full with background waiting", st)
	}
	arrivalsBefore, _, _, _ := llm.snapshot()
	if llm.releaseOneBg() == "" {
		t.Fatal("no held background call to release")
	}
	llm.await(t, ctx, "the waiting orchestration call at the server", func(s *mission_llm) bool {
		for _, a := range s.arrivals {
			if a.Content == "o2" {
				return true
			}
		}
		return false
	})
	if err := <-directErr; err != nil {
		t.Fatalf("o2: %v", err)
	}
	{
		arrivals, _, _, _ := llm.snapshot()
		next := arrivals[len(arrivalsBefore)]
		if next.Content != "o2" {
			t.Errorf("first call after a background slot freed was %q (rank %d), want the waiting high call o2", next.Content, next.Rank)
		}
		if next.Gate.Waiting.Of(priority.BackgroundIngestion) < 1 {
			t.Errorf("o2 arrived with no background caller waiting (%+v): the hand-off proved nothing", next.Gate)
		}
	}

	// Let the LLM flow again; wave 2 lands mid-flood.
	llm.release(-1, false)
	if err := <-directErr; err != nil {
		t.Fatalf("o1: %v", err)
	}
	w2 := bgStarted.Load() + missionBackground/4
	wave2At.Store(w2)
	if bgStarted.Load() >= w2 {
		t.Fatalf("background ran ahead of the test: %d starts", bgStarted.Load())
	}
	mission_wait(t, ctx, fmt.Sprintf("%d background starts", w2), reachedWave2)
	for i := range missionWave2 {
		if _, err := wc.Submit(ctx, workitems.Item{ID: fmt.Sprintf("w2-%d", i), Type: missionHighType}); err != nil {
			t.Fatal(err)
		}
	}
	submitted := bgStarted.Load()
	mission_wait(t, ctx, "wave 2 done", led.wave["w2"])
	mission_waitFor(t, ctx, fmt.Sprintf("all %d items done", total), led.all, missionDrain)
	stopPool()
	if err := <-poolDone; err != nil {
		t.Fatalf("pool.Run: %v", err)
	}
	poolDone <- nil // for the deferred wait

	// Every item ran exactly once, successfully, under its class.
	led.mu.Lock()
	if len(led.runs) != total {
		t.Errorf("%d distinct items ran, want %d", len(led.runs), total)
	}
	var wave1, wave2 []*mission_run
	for id, runs := range led.runs {
		if len(runs) != 1 || runs[0].Err != nil || !runs[0].Done {
			t.Errorf("%s: %d runs, first %+v", id, len(runs), *runs[0])
			continue
		}
		r := runs[0]
		if want := priority.ForTaskType(r.Type); r.Class != want {
			t.Errorf("%s ran under %v, want %v", id, r.Class, want)
		}
		switch {
		case strings.HasPrefix(id, "w1-"):
			wave1 = append(wave1, r)
		case strings.HasPrefix(id, "w2-"):
			wave2 = append(wave2, r)
		}
	}
	led.mu.Unlock()
	if n := logs.n.Load(); n != 0 {
		t.Errorf("the pool logged %d warnings: %q", n, logs.messages())
	}
	st, err := wc.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for cls, s := range st.Classes {
		if s.Queued != 0 || s.InFlight != 0 || s.Dead != 0 {
			t.Errorf("class %s after the run: %+v, want nothing queued, in flight or dead", cls, s)
		}
	}
	if ps := pool.Stats(); ps.Claimed != int64(total) {
		t.Errorf("pool claimed and ran %d, want %d (stats %+v)", ps.Claimed, total, ps)
	}

	// Wave 1: claimed with the backlog queued, admitted by the gate while
	// background held its ceiling and another background caller waited.
	for _, r := range wave1 {
		if r.BgQueued == 0 {
			t.Errorf("%s claimed with no background queued", r.ID)
		}
		if r.Gate.InFlight != ceiling || r.Gate.Waiting.Of(priority.BackgroundIngestion) < 1 {
			t.Errorf("%s started with the gate at %+v, want %d background in flight and background waiting", r.ID, r.Gate, ceiling)
		}
	}
	// Wave 2: claimed ahead of the backlog. Once its submits returned,
	// each claim serves the high classes first, so the background starts
	// that precede its claims are those already claimed (at most one per
	// worker) plus the one claim that was under way.
	sort.Slice(wave2, func(i, j int) bool { return wave2[i].BgBefore < wave2[j].BgBefore })
	for _, r := range wave2 {
		if r.BgQueued == 0 || r.BgBefore >= missionBackground {
			t.Errorf("%s claimed after the backlog drained (%d background started, %d queued)", r.ID, r.BgBefore, r.BgQueued)
		}
	}
	if late := wave2[len(wave2)-1].BgBefore - submitted; late > missionWorkers+1 {
		t.Errorf("%d background tasks started between the wave-2 submits and the last wave-2 claim, want at most %d", late, missionWorkers+1)
	} else {
		t.Logf("wave 2: %d background starts between its submits and its last claim", late)
	}

	// The LLM side.
	arrivals, maxBg, maxTotal, bad := llm.snapshot()
	if len(bad) != 0 {
		t.Errorf("the fake LLM got unexpected requests: %q", bad)
	}
	if maxBg != ceiling {
		t.Errorf("at most %d background calls were in the server at once, want exactly the ceiling %d", maxBg, ceiling)
	}
	if maxTotal > gate.Capacity() {
		t.Errorf("%d calls in the server at once, capacity %d", maxTotal, gate.Capacity())
	}
	seen := map[string]int{}
	for _, a := range arrivals {
		seen[a.Content]++
		want := priority.Orchestration.Rank() // the test's own untagged calls
		switch {
		case strings.HasPrefix(a.Content, "bg-"):
			want = priority.BackgroundIngestion.Rank()
		case strings.HasPrefix(a.Content, "w1-"), strings.HasPrefix(a.Content, "w2-"):
			want = priority.Interactive.Rank()
			if strings.HasPrefix(a.Content, "w1-") && (a.BgInServer != ceiling || a.Gate.Waiting.Of(priority.BackgroundIngestion) < 1) {
				t.Errorf("wave-1 call %s arrived beside %d background calls with the gate at %+v, want the ceiling %d held and background waiting",
					a.Content, a.BgInServer, a.Gate, ceiling)
			}
		}
		if a.Rank != want {
			t.Errorf("call %s carried priority %d, want %d", a.Content, a.Rank, want)
		}
	}
	if len(seen) != total+2 {
		t.Errorf("%d distinct calls reached the LLM, want %d", len(seen), total+2)
	}
	for c, n := range seen {
		if n != 1 {
			t.Errorf("call %s reached the LLM %d times", c, n)
		}
	}

	// The gate's own accounting.
	gs := gate.Stats()
	if gs.InFlight != 0 || gs.Waiting.Total() != 0 || gs.Cancelled.Total() != 0 {
		t.Errorf("gate after the run: %+v", gs)
	}
	if got, want := gs.Admitted.Of(priority.Interactive), int64(missionWave1+missionWave2); got != want {
		t.Errorf("gate admitted %d interactive calls, want %d", got, want)
	}
	if got := gs.Admitted.Of(priority.BackgroundIngestion); got != missionBackground {
		t.Errorf("gate admitted %d background calls, want %d", got, missionBackground)
	}
	waits := mission_waitHistogram(t, ctx, reader)
	if h := waits[priority.Interactive]; h.count != missionWave1+missionWave2 || h.max != 0 {
		t.Errorf("interactive admissions: %d recorded, longest wait %gs; want %d, none waiting", h.count, h.max, missionWave1+missionWave2)
	}
	if h := waits[priority.BackgroundIngestion]; h.count != missionBackground || h.max <= 0 {
		t.Errorf("background admissions: %d recorded, longest wait %gs; want %d with waits", h.count, h.max, missionBackground)
	}
	blocked := map[string]int{}
	tasks := map[string]string{}
	for _, s := range spans.GetSpans() {
		class := mission_attr(s.Attributes, string(priority.AttributeKey))
		switch s.Name {
		case "llmgate.wait":
			blocked[class]++
		case "scheduler.task":
			id := mission_attr(s.Attributes, "edict.task.id")
			if _, dup := tasks[id]; dup {
				t.Errorf("two task spans for %s", id)
			}
			tasks[id] = class
		}
	}
	if blocked[priority.Interactive.String()] != 0 || blocked[priority.BackgroundIngestion.String()] == 0 || blocked[priority.Orchestration.String()] != 1 {
		t.Errorf("blocked gate waits by class %v: want none interactive, some background, the one orchestration call", blocked)
	}
	if len(tasks) != total {
		t.Errorf("%d task spans, want %d", len(tasks), total)
	}
	for id, class := range tasks {
		want := priority.BackgroundIngestion.String()
		if strings.HasPrefix(id, "w") {
			want = priority.Interactive.String()
		}
		if class != want {
			t.Errorf("task span of %s has %s=%q, want %q", id, priority.AttributeKey, class, want)
		}
	}
	t.Logf("pool %+v; gate admitted %v; blocked waits %v", pool.Stats(), gs.Admitted, blocked)
}

// mission_hist is one class's wait histogram.
type mission_hist struct {
	count uint64
	max   float64
}

// mission_waitHistogram collects edict_llmgate_wait_seconds by class.
func mission_waitHistogram(t *testing.T, ctx context.Context, r *sdkmetric.ManualReader) map[priority.Class]mission_hist {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	out := map[priority.Class]mission_hist{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "edict_llmgate_wait_seconds" {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				v, _ := dp.Attributes.Value("class")
				c, err := priority.Parse(v.AsString())
				if err != nil {
					t.Fatalf("class label %q: %v", v.AsString(), err)
				}
				mx, _ := dp.Max.Value()
				out[c] = mission_hist{count: dp.Count, max: mx}
			}
		}
	}
	return out
}

// mission_attr returns the string value of key among attrs.
func mission_attr(attrs []attribute.KeyValue, key string) string {
	for _, a := range attrs {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

package workitems_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/internal/worktest"
	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

// benchSubmit queues n items of typ with up to 16 submits in flight.
func benchSubmit(b *testing.B, c *workitems.Client, prefix, typ string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	per := (n + 15) / 16
	for g := range 16 {
		wg.Go(func() {
			for i := g * per; i < min(n, (g+1)*per); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := c.Submit(ctx, workitems.Item{ID: prefix + strconv.Itoa(i), Type: typ})
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkClaimAck measures claim → ack through the engine against a raw
// JetStream pull consumer fetching and acking on the same server.
func BenchmarkClaimAck(b *testing.B) {
	e := startEngine(b, work.Config{}, admission.QoSConfig{})
	c := newClient(b, e.nc, workitems.Config{})
	ctx := context.Background()

	// Baseline: raw JetStream, one message fetched and acked at a time.
	js, err := jetstream.New(e.nc)
	if err != nil {
		b.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1})
	if err != nil {
		b.Fatal(err)
	}
	const rawN = 2000
	for i := range rawN {
		if _, err := js.Publish(ctx, "raw.x", []byte(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for range rawN {
		batch, err := cons.FetchNoWait(1)
		if err != nil {
			b.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	rawPer := time.Since(start) / rawN

	refill := 0
	for b.Loop() {
		cl, err := c.Claim(ctx, workitems.ClaimRequest{})
		if err != nil {
			b.Fatal(err)
		}
		if cl == nil {
			b.StopTimer()
			benchSubmit(b, c, fmt.Sprintf("ca%d-", refill), "document", 1000)
			refill++
			b.StartTimer()
			continue
		}
		if err := cl.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ours := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(rawPer)/float64(ours), "x-vs-raw-jetstream")
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[(len(d)*99)/100]
}

// BenchmarkInteractiveClaimBacklog measures an interactive claim's p99
// latency on an engine with a background backlog queued against an engine
// whose queue is otherwise empty, both in this process. Samples alternate
// between the two engines so load from outside the benchmark hits both
// alike. The backlog is submitted through the engine (16 submits in
// flight), as a producer would. EDICT_BENCH_BACKLOG scales it (default
// 100000).
func BenchmarkInteractiveClaimBacklog(b *testing.B) {
	backlog := 100_000
	if v, err := strconv.Atoi(os.Getenv("EDICT_BENCH_BACKLOG")); err == nil && v > 0 {
		backlog = v
	}
	ctx := priority.With(context.Background(), priority.Interactive)
	type side struct {
		c *workitems.Client
		n int
	}
	newSide := func() *side {
		e := startEngine(b, work.Config{}, admission.QoSConfig{})
		return &side{c: newClient(b, e.nc, workitems.Config{})}
	}
	sample := func(s *side) time.Duration {
		s.n++
		if _, err := s.c.Submit(ctx, workitems.Item{ID: "i" + strconv.Itoa(s.n), Type: "conversation"}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		cl, err := s.c.Claim(ctx, workitems.ClaimRequest{})
		d := time.Since(t0)
		if err != nil || cl == nil || cl.Class != priority.Interactive {
			b.Fatalf("claim = %+v, %v", cl, err)
		}
		if err := cl.Ack(ctx); err != nil {
			b.Fatal(err)
		}
		return d
	}
	empty, loaded := newSide(), newSide()
	start := time.Now()
	benchSubmit(b, loaded.c, "bg-", "codebase", backlog)
	st, err := loaded.c.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if q := st.Classes["background_ingestion"].Queued; q != backlog {
		b.Fatalf("background queued = %d, want %d", q, backlog)
	}
	b.Logf("queued %d background items through the engine in %v", backlog, time.Since(start).Round(time.Millisecond))
	for range 200 { // warm up both: connections, caches, consumers
		sample(empty)
		sample(loaded)
	}
	var de, dl []time.Duration
	for b.Loop() {
		de = append(de, sample(empty))
		dl = append(dl, sample(loaded))
	}
	pe, pl := p99(de), p99(dl)
	b.ReportMetric(float64(pl.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(pe.Microseconds())/1000, "p99-empty-ms")
	b.ReportMetric(float64(pl)/float64(pe), "x-vs-empty-queue")
}

// BenchmarkShedPacing counts the claims that reach the engine from a
// claimer polling every millisecond of a simulated minute while the engine
// sheds every one of them, after the first 10 s, against the same claimer
// without pacing (every poll reaches the engine).
func BenchmarkShedPacing(b *testing.B) {
	s := natstest.Run(b, nil)
	nc := natstest.Connect(b, s)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	w, err := work.Open(context.Background(), js, work.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	srv := worktest.Serve(b, nc, w, worktest.Config{Shed: func(op string, _ priority.Class) bool { return op == "claim" }})
	ctx := priority.With(context.Background(), priority.BackgroundIngestion)
	var perSec float64
	for b.Loop() {
		clk := &fakeClock{t: time.Unix(0, 0)}
		c := newClient(b, nc, workitems.Config{Now: clk.now})
		before := srv.Reached("claim")
		var after10 int64
		for ms := range 60_000 {
			if ms == 10_000 {
				after10 = srv.Reached("claim")
			}
			if _, err := c.Claim(ctx, workitems.ClaimRequest{}); err == nil || !workitems.IsBusyShed(err) {
				b.Fatalf("claim under shedding = %v", err)
			}
			clk.t = clk.t.Add(time.Millisecond)
		}
		_ = before
		perSec = float64(srv.Reached("claim")-after10) / 50
	}
	b.ReportMetric(perSec, "engine-claims/s-after-10s")
	b.ReportMetric(perSec/1000, "x-vs-unpaced")
}

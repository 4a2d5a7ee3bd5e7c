package workitems_test

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/daemon"
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

// daemonEngine is the work service as edict serve runs it: the engine on
// an in-process connection to the server (daemon.go), the collector at
// daemon.GCPercent unless GOGC is set. Workers, and the raw JetStream
// baseline, connect over TCP like a worker process.
//
// The engine records every grant for one Lease after Open (engine/work,
// "Unrecorded grants"); the benchmarks measure the steady state after it,
// so the lease is benchLease and startDaemonEngine waits it out.
type daemonEngine struct {
	srv    *server.Server
	client *nats.Conn
}

func startDaemonEngine(b *testing.B) *daemonEngine {
	b.Helper()
	if os.Getenv("GOGC") == "" {
		old := debug.SetGCPercent(daemon.GCPercent)
		b.Cleanup(func() { debug.SetGCPercent(old) })
	}
	s := natstest.Run(b, nil)
	enc := natstest.Connect(b, s, nats.InProcessServer(s))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // setup deadline
	defer cancel()
	js, err := jetstream.New(enc)
	if err != nil {
		b.Fatal(err)
	}
	w, err := work.Open(ctx, js, work.Config{Lease: benchLease})
	if err != nil {
		b.Fatal(err)
	}
	warm := time.Now().Add(benchLease)
	svc, err := service.Start(ctx, enc, service.Config{Work: w})
	if err != nil {
		_ = w.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = svc.Close()
		_ = w.Close()
	})
	client := natstest.Connect(b, s)
	time.Sleep(time.Until(warm)) // benchmark setup: past the first Lease after Open
	return &daemonEngine{srv: s, client: client}
}

// benchLease is the engine's lease (AckWait) in the claim → ack benchmarks.
const benchLease = 3 * time.Second

// claimAckRound is the number of items each side settles per round.
const claimAckRound = 500

// BenchmarkClaimAck measures claim → ack throughput through the engine
// against a raw JetStream pull consumer fetching and acking on the same
// server (FetchNoWait(1) + DoubleAck), one item at a time. Each iteration
// is one round of claimAckRound items on every side, so drifts in machine
// load hit all sides alike; queues are filled outside the timed parts.
// Three ratios (raw time over ours, so higher is better):
//   - x-vs-raw-jetstream: Claim then Ack, two engine requests per item;
//   - acknext-x-vs-raw-jetstream: AckNext, which acks and claims the next
//     item in one request, as JetStream's +NXT does;
//   - acknext-x-vs-raw-acknext: AckNext against raw JetStream doing the
//     same (+NXT), for the record.
func BenchmarkClaimAck(b *testing.B) {
	e := startDaemonEngine(b)
	c := newClient(b, e.client, workitems.Config{})
	ctx := context.Background()
	js, err := jetstream.New(e.client)
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
	fillRaw := func() {
		for i := range claimAckRound {
			if _, err := js.PublishAsync("raw.x", []byte(strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("raw publish did not complete")
		}
	}
	round := 0
	fill := func() {
		round++
		benchSubmit(b, c, fmt.Sprintf("r%d-", round), "document", claimAckRound)
	}
	var raw, rawNext, plain, next time.Duration
	for b.Loop() {
		b.StopTimer()
		fillRaw()
		b.StartTimer()
		t0 := time.Now()
		for range claimAckRound {
			batch, err := cons.FetchNoWait(1)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				if err := m.DoubleAck(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if n != 1 {
				b.Fatalf("raw fetch got %d messages: %v", n, batch.Error())
			}
		}
		raw += time.Since(t0)

		b.StopTimer()
		fillRaw()
		b.StartTimer()
		t0 = time.Now()
		rawAckNext(b, e.client, cons, claimAckRound)
		rawNext += time.Since(t0)

		b.StopTimer()
		fill()
		b.StartTimer()
		t0 = time.Now()
		for range claimAckRound {
			cl, err := c.Claim(ctx, workitems.ClaimRequest{})
			if err != nil || cl == nil {
				b.Fatalf("claim = %v, %v", cl, err)
			}
			if err := cl.Ack(ctx); err != nil {
				b.Fatal(err)
			}
		}
		plain += time.Since(t0)

		b.StopTimer()
		fill()
		b.StartTimer()
		t0 = time.Now()
		cl, err := c.Claim(ctx, workitems.ClaimRequest{})
		for i := 1; err == nil && i < claimAckRound; i++ {
			if cl == nil {
				b.Fatalf("AckNext found nothing after %d items", i)
			}
			cl, err = cl.AckNext(ctx, workitems.ClaimRequest{})
		}
		if err == nil && cl != nil {
			err = cl.Ack(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		next += time.Since(t0)
	}
	items := float64(b.N * claimAckRound)
	b.ReportMetric(float64(raw)/float64(plain), "x-vs-raw-jetstream")
	b.ReportMetric(float64(raw)/float64(next), "acknext-x-vs-raw-jetstream")
	b.ReportMetric(float64(rawNext)/float64(next), "acknext-x-vs-raw-acknext")
	b.ReportMetric(float64(raw.Microseconds())/items, "raw-us/item")
	b.ReportMetric(float64(plain.Microseconds())/items, "claim+ack-us/item")
	b.ReportMetric(float64(next.Microseconds())/items, "acknext-us/item")
	b.ReportMetric(0, "ns/op")
}

// rawAckNext fetches one message and then settles n−1 with "+NXT", each
// asking for the next message in the same request, and acks the last.
func rawAckNext(b *testing.B, nc *nats.Conn, cons jetstream.Consumer, n int) {
	b.Helper()
	ctx := context.Background()
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		b.Fatal(err)
	}
	var reply string
	for m := range batch.Messages() {
		reply = m.Reply()
	}
	if reply == "" {
		b.Fatal("raw fetch got nothing")
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for range n - 1 {
		if err := nc.PublishRequest(reply, inbox, []byte(`+NXT {"batch":1,"no_wait":true}`)); err != nil {
			b.Fatal(err)
		}
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil || len(m.Data) == 0 {
			b.Fatalf("+NXT answer %v, %v", m, err)
		}
		reply = m.Reply
	}
	if _, err := nc.Request(reply, []byte("+ACK"), 10*time.Second); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimAckParallel is BenchmarkClaimAck's throughput with 16
// workers on each side, each on its own connection: the machine is then
// CPU-bound, so the ratios compare the work each side does per item.
func BenchmarkClaimAckParallel(b *testing.B) {
	const workers = 16
	e := startDaemonEngine(b)
	ctx := context.Background()
	clients := make([]*workitems.Client, workers)
	conss := make([]jetstream.Consumer, workers)
	var js jetstream.JetStream
	for i := range workers {
		nc := natstest.Connect(b, e.srv)
		clients[i] = newClient(b, nc, workitems.Config{})
		j, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			js = j
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
				b.Fatal(err)
			}
			if _, err := js.CreateOrUpdateConsumer(ctx, "RAW", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1}); err != nil {
				b.Fatal(err)
			}
		}
		if conss[i], err = j.Consumer(ctx, "RAW", "raw"); err != nil {
			b.Fatal(err)
		}
	}
	const perRound = 4000
	run := func(f func(i int) error) time.Duration {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		t0 := time.Now()
		for i := range workers {
			wg.Go(func() {
				if err := f(i); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		d := time.Since(t0)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return d
	}
	round := 0
	var raw, plain, next time.Duration
	for b.Loop() {
		b.StopTimer()
		for i := range perRound {
			if _, err := js.PublishAsync("raw.x", []byte(strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		b.StartTimer()
		raw += run(func(i int) error {
			for {
				batch, err := conss[i].FetchNoWait(1)
				if err != nil {
					return err
				}
				got := false
				for m := range batch.Messages() {
					got = true
					if err := m.DoubleAck(ctx); err != nil {
						return err
					}
				}
				if !got {
					return nil
				}
			}
		})
		b.StopTimer()
		round++
		benchSubmit(b, clients[0], fmt.Sprintf("p%d-", round), "document", perRound)
		b.StartTimer()
		plain += run(func(i int) error {
			for {
				cl, err := clients[i].Claim(ctx, workitems.ClaimRequest{})
				if err != nil || cl == nil {
					return err
				}
				if err := cl.Ack(ctx); err != nil {
					return err
				}
			}
		})
		b.StopTimer()
		round++
		benchSubmit(b, clients[0], fmt.Sprintf("p%d-", round), "document", perRound)
		b.StartTimer()
		next += run(func(i int) error {
			cl, err := clients[i].Claim(ctx, workitems.ClaimRequest{})
			for err == nil && cl != nil {
				cl, err = cl.AckNext(ctx, workitems.ClaimRequest{})
			}
			return err
		})
	}
	b.ReportMetric(float64(raw)/float64(plain), "x-vs-raw-jetstream")
	b.ReportMetric(float64(raw)/float64(next), "acknext-x-vs-raw-jetstream")
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N*perRound), "raw-us/item")
	b.ReportMetric(0, "ns/op")
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

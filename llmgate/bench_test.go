package llmgate

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/edictrt/edict/priority"
)

// The benchmarks compare against golang.org/x/sync/semaphore measured in the
// same run and report the ratio; BENCHMARKS.md records the figures.

const (
	benchCapacity = 8                      // reserve 3, background ceiling 5
	benchHold     = 200 * time.Microsecond // how long a loaded call holds its slot
	benchWorkers  = 3*benchCapacity + 2    // background callers: ≥ 2×capacity always waiting
)

// BenchmarkAcquireRelease is an uncontended Acquire+Release, against
// semaphore.Weighted.Acquire(ctx, 1)+Release(1) for as many iterations.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, c := range []priority.Class{priority.Interactive, priority.BackgroundIngestion} {
		b.Run(c.String(), func(b *testing.B) {
			ctx := priority.With(context.Background(), c)
			g := newGate(b, Config{Capacity: benchCapacity})
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
				g.Release()
			}
			gate := float64(b.Elapsed()) / float64(b.N)

			sem := semaphore.NewWeighted(benchCapacity)
			t0 := time.Now()
			for range b.N {
				if err := sem.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				sem.Release(1)
			}
			base := float64(time.Since(t0)) / float64(b.N)
			b.ReportMetric(gate/base, "x-vs-xsync")
			b.ReportMetric(base, "xsync-ns/op")
		})
	}
}

// limiter is the face shared by the gate and the FIFO baseline.
type limiter struct {
	acquire func(context.Context) error
	release func()
}

func gateLimiter(g *Gate) limiter { return limiter{g.Acquire, g.Release} }

func fifoLimiter(n int64) limiter {
	s := semaphore.NewWeighted(n)
	return limiter{func(ctx context.Context) error { return s.Acquire(ctx, 1) }, func() { s.Release(1) }}
}

// load runs background callers through l, each holding a slot for
// benchHold, until stop is called; holding counts the slots they hold.
func load(l limiter, workers int, holding *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(priority.With(context.Background(), priority.BackgroundIngestion))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if l.acquire(ctx) != nil {
					return
				}
				holding.Add(1)
				time.Sleep(benchHold)
				holding.Add(-1)
				l.release()
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// interactiveWait is one interactive arrival: its admission wait; it then
// holds the slot for benchHold like the background calls.
func interactiveWait(b *testing.B, l limiter) time.Duration {
	ctx := priority.With(context.Background(), priority.Interactive)
	t0 := time.Now()
	if err := l.acquire(ctx); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	time.Sleep(benchHold)
	l.release()
	return d
}

func p99(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[(len(d)*99)/100])
}

// BenchmarkInteractiveWaitSaturated measures the p99 admission wait of
// interactive arrivals while background callers saturate a capacity-8 gate
// with at least 16 of them always waiting, against the same load through a
// FIFO semaphore of 8. One op is one interactive arrival.
func BenchmarkInteractiveWaitSaturated(b *testing.B) {
	const baseSamples = 500
	var holding atomic.Int64
	fifo := fifoLimiter(benchCapacity)
	stop := load(fifo, benchWorkers, &holding)
	base := make([]time.Duration, 0, baseSamples)
	for range baseSamples {
		base = append(base, interactiveWait(b, fifo))
	}
	stop()

	g := newGate(b, Config{Capacity: benchCapacity})
	stop = load(gateLimiter(g), benchWorkers, &holding)
	defer stop()
	var waits []time.Duration
	minWaiting := int64(benchWorkers)
	for b.Loop() {
		minWaiting = min(minWaiting, g.Stats().Waiting.Of(priority.BackgroundIngestion))
		waits = append(waits, interactiveWait(b, gateLimiter(g)))
	}
	gp, fp := p99(waits), p99(base)
	b.ReportMetric(gp/fp, "p99-x-vs-xsync")
	b.ReportMetric(gp, "p99-ns")
	b.ReportMetric(fp, "xsync-p99-ns")
	b.ReportMetric(float64(minWaiting), "min-bg-waiting")
}

// BenchmarkWorkConservation samples how many background calls hold a slot
// when background runs alone on a capacity-8 gate (ceiling 5), as a share of
// capacity-reserve, against a FIFO semaphore of 5 under the same load. One
// op is one sample, 50µs apart.
func BenchmarkWorkConservation(b *testing.B) {
	const gap = 50 * time.Microsecond
	sample := func(holding *atomic.Int64, n int, loop func() bool) float64 {
		var sum, count float64
		for i := 0; loop == nil && i < n || loop != nil && loop(); i++ {
			time.Sleep(gap)
			sum += float64(holding.Load())
			count++
		}
		return sum / count
	}
	g := newGate(b, Config{Capacity: benchCapacity})
	ceiling := float64(g.Capacity() - g.Reserve())

	var holding atomic.Int64
	stop := load(fifoLimiter(int64(ceiling)), 2*benchCapacity, &holding)
	base := sample(&holding, 2000, nil) / ceiling
	stop()

	holding.Store(0)
	stop = load(gateLimiter(g), 2*benchCapacity, &holding)
	defer stop()
	util := sample(&holding, 0, b.Loop) / ceiling
	b.ReportMetric(util, "x-of-ceiling")
	b.ReportMetric(util/base, "x-vs-xsync")
}

package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/store"
)

const benchWriters = 64

// rounds runs writers goroutines, each calling write perRound times, and
// returns when all are done.
func rounds(writers, perRound int, write func(w, i int)) {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perRound {
				write(w, i)
			}
		})
	}
	wg.Wait()
}

var seq atomic.Int64

// rawUpdateRate is the baseline: writers concurrent goroutines, one bbolt
// Update (one fsync) per write. Writes per second.
func rawUpdateRate(b *testing.B, writers, total int) float64 {
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bbolt.Options{InitialMmapSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	rounds(writers, total/writers, func(w, i int) {
		db.Update(func(tx *bbolt.Tx) error {
			bk, _ := tx.CreateBucketIfNotExists([]byte("g"))
			return bk.Put(fmt.Appendf(nil, "%d-%d", w, i), []byte(`{"v":1}`))
		})
	})
	return float64(total) / time.Since(start).Seconds()
}

// BenchmarkGroupCommit: 64 concurrent writers through the shard writer
// against one bbolt Update per write (target ≥ 10×).
func BenchmarkGroupCommit(b *testing.B) {
	base := rawUpdateRate(b, benchWriters, 512)
	s := open(b, b.TempDir(), store.Config{Shards: 1})
	ctx := context.Background()
	const per = 8
	for b.Loop() {
		rounds(benchWriters, per, func(w, i int) {
			s.NodePut(ctx, "g", store.Node{ID: fmt.Sprint(seq.Add(1)), Props: []byte(`{"v":1}`)})
		})
	}
	rate := float64(b.N*benchWriters*per) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "writes/s")
	b.ReportMetric(base, "baseline-writes/s")
	b.ReportMetric(rate/base, "x-vs-bbolt-update")
}

func shardRate(b *testing.B, k int, graphs []string, per int, loop func(func())) float64 {
	s, err := store.Open(b.TempDir(), store.Config{Shards: k, InitialMmapSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	n := 0
	start := time.Now()
	loop(func() {
		rounds(benchWriters, per, func(w, i int) {
			s.NodePut(ctx, graphs[w%len(graphs)], store.Node{ID: fmt.Sprint(seq.Add(1)), Props: []byte(`{"v":1}`)})
		})
		n += benchWriters * per
	})
	return float64(n) / time.Since(start).Seconds()
}

// benchGraphs returns n graph names, spread evenly over 4 shards.
func benchGraphs(n int) []string {
	var out []string
	per := map[int]int{}
	for i := 0; len(out) < n; i++ {
		g := fmt.Sprintf("tenant-%d", i)
		if s := store.ShardIndex(g, 4); per[s] < n/4 {
			per[s]++
			out = append(out, g)
		}
	}
	return out
}

// BenchmarkShardScaling: independent graphs on K=4 against K=1 (target ≥ 1.5×).
func BenchmarkShardScaling(b *testing.B) {
	graphs := benchGraphs(8)
	base := shardRate(b, 1, graphs, 8, func(f func()) {
		for range 8 {
			f()
		}
	})
	rate := shardRate(b, 4, graphs, 8, func(f func()) {
		for b.Loop() {
			f()
		}
	})
	b.ReportMetric(rate, "writes/s")
	b.ReportMetric(base, "k1-writes/s")
	b.ReportMetric(rate/base, "x-vs-k1")
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// BenchmarkReadsUnderFirehose: p99 of node reads while writers saturate
// every shard, against the p99 idle (target ≤ 1.5×).
func BenchmarkReadsUnderFirehose(b *testing.B) {
	s := open(b, b.TempDir(), store.Config{Shards: 4})
	ctx := context.Background()
	graphs := benchGraphs(8)
	for _, g := range graphs {
		for i := range 100 {
			s.NodePut(ctx, g, store.Node{ID: fmt.Sprint(i), Props: []byte(`{"v":1}`)})
		}
	}
	read := func(i int) time.Duration {
		t0 := time.Now()
		if _, err := s.NodeGet(ctx, graphs[i%len(graphs)], fmt.Sprint(i%100)); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for i := range 5000 { // warm the page cache and the mmap
		read(i)
	}
	idle := make([]time.Duration, 5000)
	for i := range idle {
		idle[i] = read(i)
	}
	idleP99 := p99(idle)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range benchWriters {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s.NodePut(ctx, graphs[w%len(graphs)], store.Node{ID: fmt.Sprintf("w%d-%d", w, i), Props: []byte(`{"v":1}`)})
			}
		})
	}
	var busy []time.Duration
	i := 0
	for b.Loop() {
		busy = append(busy, read(i))
		i++
	}
	close(stop)
	wg.Wait()
	busyP99 := p99(busy)
	b.ReportMetric(float64(idleP99.Microseconds()), "idle-p99-µs")
	b.ReportMetric(float64(busyP99.Microseconds()), "firehose-p99-µs")
	b.ReportMetric(float64(busyP99)/float64(idleP99), "x-vs-idle-p99")
}

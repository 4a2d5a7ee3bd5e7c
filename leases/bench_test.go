package leases

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// junkDir returns a directory holding n junk entries. With leaseNamed the
// names end in .json and every inspected entry is opened and parsed (the
// worst case); otherwise they are non-lease names, only counted.
func junkDir(b *testing.B, n int, leaseNamed bool) string {
	b.Helper()
	dir := b.TempDir()
	if base := os.Getenv("LEASES_BENCH_DIR"); base != "" {
		// e.g. /dev/shm, to compare filesystems (see BENCHMARKS.md).
		d, err := os.MkdirTemp(base, "leases-bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	for i := range n {
		name := fmt.Sprintf("junk-%05d", i)
		if leaseNamed {
			name += ".json"
		}
		fd, err := syscall.Open(filepath.Join(dir, name), syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if leaseNamed {
			_, _ = syscall.Write(fd, []byte("[]"))
		}
		_ = syscall.Close(fd)
	}
	return dir
}

// benchScan reports the cost of an uncached Active over big junk entries as
// a ratio against the same scan over smallN (ns/op covers both scans). With
// full, every Active reads the directory (Reset before each), which measures
// the bounded readdir itself; otherwise the directories are left to settle
// first, as a real lease directory is, and Active runs as in production:
// an unchanged directory is answered from the last full scan.
func benchScan(b *testing.B, smallN, big int, leaseNamed, full bool) {
	cfg := Config{CacheInterval: -1} // measure the scan, not the cache
	small := NewScanner(junkDir(b, smallN, leaseNamed), cfg)
	large := NewScanner(junkDir(b, big, leaseNamed), cfg)
	if !full {
		// The first scan prepares each directory (mode 0700); then let the
		// directories' timestamps settle.
		small.Active()
		large.Active()
		time.Sleep(2 * settledAge)
	}
	// Both scans run interleaved in the same loop, each timed on its own,
	// so the ratio compares them under the same machine load.
	var tSmall, tLarge time.Duration
	for b.Loop() {
		if full {
			small.Reset()
			large.Reset()
		}
		t0 := time.Now()
		if small.Active() {
			b.Fatal("junk directory reads as active")
		}
		t1 := time.Now()
		if large.Active() {
			b.Fatal("junk directory reads as active")
		}
		tLarge += time.Since(t1)
		tSmall += t1.Sub(t0)
	}
	b.ReportMetric(float64(tLarge.Nanoseconds())/float64(b.N), "ns/large-scan")
	b.ReportMetric(float64(tSmall.Nanoseconds())/float64(b.N), "ns/small-scan")
	b.ReportMetric(float64(tLarge)/float64(tSmall), fmt.Sprintf("x-vs-%d-entries", smallN))
}

// BenchmarkScannerActive10000Junk: Active with 10 000 non-lease entries vs
// 10, as a background loop calls it (the benchmark).
func BenchmarkScannerActive10000Junk(b *testing.B) { benchScan(b, 10, 10000, false, false) }

// BenchmarkScannerActive10000JunkJSON: the same with 10 000 garbage .json
// files, each inspected entry opened and parsed on a full scan.
func BenchmarkScannerActive10000JunkJSON(b *testing.B) { benchScan(b, 10, 10000, true, false) }

// BenchmarkScannerFullScan10000Junk: every Active reads the directory: 10 000
// non-lease entries vs 10.
func BenchmarkScannerFullScan10000Junk(b *testing.B) { benchScan(b, 10, 10000, false, true) }

// BenchmarkScannerFullScan10000JunkJSON: every Active reads the directory:
// 10 000 garbage .json files vs 10.
func BenchmarkScannerFullScan10000JunkJSON(b *testing.B) { benchScan(b, 10, 10000, true, true) }

// BenchmarkScannerFullScan10000vs1000Junk: every Active reads the directory:
// 10 000 non-lease entries vs 1 000, both beyond the 128-entry window, so
// the cost does not grow with the directory.
func BenchmarkScannerFullScan10000vs1000Junk(b *testing.B) { benchScan(b, 1000, 10000, false, true) }

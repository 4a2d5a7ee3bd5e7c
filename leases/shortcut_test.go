package leases

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestScannerUnchangedDirectoryShortcut: while the directory is unchanged a
// scan answers from what the last full scan saw, and the answer is the one a
// full scan would give at that clock; any change to the directory, an expiry
// of the live record or a Reset makes the next scan read it again. The
// settled-timestamp guard is set to 0 here because the test controls every
// change; the clock is injected, the file system is real.
func TestScannerUnchangedDirectoryShortcut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cfg := Config{TTL: time.Second, CacheInterval: -1, Now: func() time.Time { return now }}
	s := NewScanner(dir, cfg)
	s.settled = 0
	check := func(step string, want bool, wantFull int) {
		t.Helper()
		if got := s.Active(); got != want {
			t.Errorf("%s: Active = %v, want %v", step, got, want)
		}
		if s.fullScans != wantFull {
			t.Errorf("%s: %d full scans, want %d", step, s.fullScans, wantFull)
		}
	}
	plant(t, dir, "junk", "x", 0o600)
	check("junk only", false, 1)
	check("unchanged", false, 1)

	live := plant(t, dir, "0123456789abcdef0123456789abcdef.json", record(now.Add(1500*time.Millisecond)), 0o600)
	check("live record added", true, 2)
	check("unchanged, still live", true, 2)
	now = now.Add(1600 * time.Millisecond)
	check("live record expired: read again", false, 3)
	check("unchanged after expiry", false, 3)

	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	far := now.Add(10 * time.Second) // beyond now + 2·TTL: not counted yet
	plant(t, dir, "fedcba9876543210fedcba9876543210.json", record(far), 0o600)
	check("far-future record", false, 4)
	now = far.Add(-1500 * time.Millisecond) // now within 2·TTL of its expiry
	check("far-future record came into range", true, 4)

	s.Reset()
	check("after Reset", true, 5)
}

package leases

import (
	"os"
	"path/filepath"
	"syscall"
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
	// Each change below also moves the directory's mtime to a distinct
	// value: on a kernel with coarse timestamps two changes in the same
	// tick would otherwise leave it unchanged and the test would flake.
	stamp := time.Now().Add(-time.Hour)
	touch := func() {
		t.Helper()
		stamp = stamp.Add(time.Second)
		if err := os.Chtimes(dir, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
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
	touch()
	check("junk only", false, 1)
	check("unchanged", false, 1)

	live := plant(t, dir, "0123456789abcdef0123456789abcdef.json", record(now.Add(1500*time.Millisecond)), 0o600)
	touch()
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
	touch()
	check("far-future record", false, 4)
	now = far.Add(-1500 * time.Millisecond) // now within 2·TTL of its expiry
	check("far-future record came into range", true, 4)

	s.Reset()
	check("after Reset", true, 5)
}

// TestScannerErrorIsNotReused: a record that could not be read because of
// an I/O error (here EMFILE, out of file descriptors), not because of a
// rule, makes that scan's view unusable for the unchanged-directory
// shortcut: the next scan reads the directory again and finds the lease.
func TestScannerErrorIsNotReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cfg := Config{TTL: time.Second, CacheInterval: -1, Now: func() time.Time { return now }}
	plant(t, dir, "0123456789abcdef0123456789abcdef.json", record(now.Add(500*time.Millisecond)), 0o600)
	old := time.Now().Add(-time.Hour) // settled timestamps
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	s := NewScanner(dir, cfg)
	s.settled = 0
	s.open = func(string, int, uint32) (int, error) { return -1, syscall.EMFILE }
	if s.Active() {
		t.Fatal("a record that could not be opened counted")
	}
	s.open = nil
	if !s.Active() {
		t.Fatal("after an I/O error the scan's view was reused: live lease missed")
	}
	if s.fullScans != 2 {
		t.Errorf("%d full scans, want 2", s.fullScans)
	}

	// A record refused by a rule (permission bits) is remembered: the
	// unchanged directory is answered without a second full scan.
	dir2 := filepath.Join(t.TempDir(), "leases")
	if err := os.Mkdir(dir2, 0o700); err != nil {
		t.Fatal(err)
	}
	plant(t, dir2, "0123456789abcdef0123456789abcdef.json", record(now.Add(500*time.Millisecond)), 0o644)
	if err := os.Chtimes(dir2, old, old); err != nil {
		t.Fatal(err)
	}
	s2 := NewScanner(dir2, cfg)
	s2.settled = 0
	if s2.Active() || s2.Active() {
		t.Fatal("0644 record counted")
	}
	if s2.fullScans != 1 {
		t.Errorf("%d full scans over an unchanged directory, want 1", s2.fullScans)
	}
}

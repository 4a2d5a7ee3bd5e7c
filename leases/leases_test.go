package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var leaseName = regexp.MustCompile(`^[0-9a-f]{32}\.json$`)

// record returns a lease record expiring at t.
func record(t time.Time) string { return string(encodeRecord(t)) }

// plant writes a file with the given mode into dir, bypassing the umask.
func plant(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestHoldWritesPrivateRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b", "foreground-leases")
		l, err := Hold(t.Context(), dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, d := range []string{dir, filepath.Dir(dir)} {
			st, err := os.Lstat(d)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o700 || !st.IsDir() {
				t.Errorf("%s: mode %v, want drwx------", d, st.Mode())
			}
		}
		names := listDir(t, dir)
		if len(names) != 1 || !leaseName.MatchString(names[0]) {
			t.Fatalf("directory holds %q, want one <32 hex>.json", names)
		}
		st, err := os.Lstat(l.Path())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != 0o600 {
			t.Errorf("lease mode %v, want -rw-------", st.Mode())
		}
		data, err := os.ReadFile(l.Path())
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Version   float64 `json:"version"`
			ExpiresAt float64 `json:"expires_at"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("record %q: %v", data, err)
		}
		want := unixSeconds(time.Now().Add(DefaultTTL))
		if rec.Version != 1 || rec.ExpiresAt != want {
			t.Errorf("record %s, want version 1, expires_at %v", data, want)
		}
		if !strings.HasPrefix(string(data), `{"version":1,"expires_at":`) {
			t.Errorf("record %q is not the compact form", data)
		}
	})
}

func TestHoldRefreshesUntilClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config{TTL: 3 * time.Second, Refresh: time.Second}
		l, err := Hold(t.Context(), dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := NewScanner(dir, cfg)
		// Well past the TTL, the refresher keeps the lease live.
		for range 10 {
			time.Sleep(time.Second)
			synctest.Wait()
			if !s.Active() {
				t.Fatalf("lease not active at %v", time.Now())
			}
		}
		data, _ := os.ReadFile(l.Path())
		if got, want := string(data), record(time.Now().Add(3*time.Second)); got != want {
			t.Errorf("refreshed record %s, want %s", got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if names := listDir(t, dir); len(names) != 0 {
			t.Errorf("after Close directory holds %q", names)
		}
		if !s.Active() {
			t.Error("cached answer dropped before CacheInterval")
		}
		time.Sleep(DefaultCacheInterval)
		if s.Active() {
			t.Error("lease active after Close and CacheInterval")
		}
	})
}

func TestCrashedHolderExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config{CacheInterval: -1}
		// A holder that crashed right after writing: nothing refreshes.
		p := plant(t, dir, randomHex()+".json", record(time.Now().Add(DefaultTTL)), 0o600)
		s := NewScanner(dir, cfg)
		if !s.Active() {
			t.Fatal("fresh record not active")
		}
		time.Sleep(DefaultTTL - time.Millisecond)
		if !s.Active() {
			t.Fatal("record inactive before its expiry")
		}
		time.Sleep(time.Millisecond)
		if s.Active() {
			t.Fatal("record active at its expiry")
		}
		// Expired but not yet 2·TTL in the past: ignored and kept.
		time.Sleep(2 * DefaultTTL)
		s.Active()
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("record removed too early: %v", err)
		}
		time.Sleep(time.Millisecond)
		s.Active()
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stale record not removed: %v", err)
		}
	})
}

func TestHoldCancelledContextLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l, err := Hold(ctx, dir, Config{}); !errors.Is(err, context.Canceled) || l != nil {
		t.Fatalf("Hold = %v, %v; want nil, context.Canceled", l, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Hold with a done ctx touched the directory: %v", err)
	}
}

// hostileDir builds an unsafe lease directory below base and returns its
// path and the directory that must stay empty.
type hostileDir struct {
	name  string
	build func(t *testing.T, base string) (dir, watch string)
}

var hostileDirs = []hostileDir{
	{"symlink", func(t *testing.T, base string) (string, string) {
		target := filepath.Join(base, "target")
		if err := os.Mkdir(target, 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(base, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		return link, target
	}},
	{"not a directory", func(t *testing.T, base string) (string, string) {
		return plant(t, base, "file", "", 0o600), base
	}},
	{"other owner", func(t *testing.T, base string) (string, string) {
		d := filepath.Join(base, "theirs")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Skipf("chown: %v (the test needs root)", err)
		}
		return d, d
	}},
}

func TestUnsafeDirectory(t *testing.T) {
	for _, tc := range hostileDirs {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir, watch := tc.build(t, base)
			before := listDir(t, watch)
			l, err := Hold(t.Context(), dir, Config{})
			if !errors.Is(err, ErrUnsafeDir) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Hold = %v, want ErrUnsafeDir", err)
			}
			if after := listDir(t, watch); len(after) != len(before) {
				t.Errorf("Hold wrote into an unsafe directory: %q", after)
			}
			// A valid record planted behind the unsafe path is never seen.
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				plant(t, dir, randomHex()+".json", record(time.Now().Add(time.Second)), 0o600)
			}
			if NewScanner(dir, Config{}).Active() {
				t.Error("scanner trusted an unsafe directory")
			}
		})
	}
}

func TestScannerIgnoresHostileEntries(t *testing.T) {
	type tc struct {
		name  string
		plant func(t *testing.T, dir string, now time.Time)
	}
	file := func(content string, mode os.FileMode) func(*testing.T, string, time.Time) {
		return func(t *testing.T, dir string, _ time.Time) { plant(t, dir, randomHex()+".json", content, mode) }
	}
	valid := func(d time.Duration) func(*testing.T, string, time.Time) {
		return func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, randomHex()+".json", record(now.Add(d)), 0o600)
		}
	}
	cases := []tc{
		{"0644 file", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "a.json", record(now.Add(time.Second)), 0o644)
		}},
		{"0640 file", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "a.json", record(now.Add(time.Second)), 0o640)
		}},
		{"0601 file", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "a.json", record(now.Add(time.Second)), 0o601)
		}},
		{"FIFO", func(t *testing.T, dir string, _ time.Time) {
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"1 MiB file", func(t *testing.T, dir string, now time.Time) {
			big := record(now.Add(time.Second)) + strings.Repeat(" ", 1<<20)
			plant(t, dir, "big.json", big, 0o600)
		}},
		{"257 bytes", func(t *testing.T, dir string, now time.Time) {
			r := record(now.Add(time.Second))
			plant(t, dir, "big.json", r+strings.Repeat(" ", 257-len(r)), 0o600)
		}},
		{"array", file(`[]`, 0o600)},
		{"null", file(`null`, 0o600)},
		{"number", file(`1`, 0o600)},
		{"string", file(`"x"`, 0o600)},
		{"garbage", file("\x00\xff{{{", 0o600)},
		{"empty", file(``, 0o600)},
		{"NaN", file(`{"version":1,"expires_at":NaN}`, 0o600)},
		{"Infinity", file(`{"version":1,"expires_at":Infinity}`, 0o600)},
		{"1e400", file(`{"version":1,"expires_at":1e400}`, 0o600)},
		{"expires_at string", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "s.json", fmt.Sprintf(`{"version":1,"expires_at":"%v"}`, unixSeconds(now)+1), 0o600)
		}},
		{"expires_at bool", file(`{"version":1,"expires_at":true}`, 0o600)},
		{"expires_at null", file(`{"version":1,"expires_at":null}`, 0o600)},
		{"no expires_at", file(`{"version":1}`, 0o600)},
		{"version 2", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "v.json", fmt.Sprintf(`{"version":2,"expires_at":%v}`, unixSeconds(now)+1), 0o600)
		}},
		{"version true", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "v.json", fmt.Sprintf(`{"version":true,"expires_at":%v}`, unixSeconds(now)+1), 0o600)
		}},
		{"version string", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, "v.json", fmt.Sprintf(`{"version":"1","expires_at":%v}`, unixSeconds(now)+1), 0o600)
		}},
		{"far future", valid(2*DefaultTTL + time.Millisecond)},
		{"200 years ahead", valid(200 * 365 * 24 * time.Hour)},
		{"expired", valid(-time.Millisecond)},
		{"expires now", valid(0)},
		{"wrong suffix", func(t *testing.T, dir string, now time.Time) {
			plant(t, dir, randomHex()+".json.tmp", record(now.Add(time.Second)), 0o600)
		}},
		{"symlink to a valid record", func(t *testing.T, dir string, now time.Time) {
			elsewhere := t.TempDir()
			p := plant(t, elsewhere, "real.json", record(now.Add(time.Second)), 0o600)
			if err := os.Symlink(p, filepath.Join(dir, "link.json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, dir string, _ time.Time) {
			if err := os.Mkdir(filepath.Join(dir, "d.json"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"other owner", func(t *testing.T, dir string, now time.Time) {
			p := plant(t, dir, "theirs.json", record(now.Add(time.Second)), 0o600)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Skipf("chown: %v (the test needs root)", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				c.plant(t, dir, time.Now())
				s := NewScanner(dir, Config{CacheInterval: -1})
				if s.Active() {
					t.Fatal("hostile entry counted as a live lease")
				}
				// The scan still works: a valid lease beside the junk counts.
				plant(t, dir, randomHex()+".json", record(time.Now().Add(time.Second)), 0o600)
				if !s.Active() {
					t.Fatal("valid lease beside a hostile entry not seen")
				}
			})
		})
	}
}

func TestScannerAcceptsBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		for _, content := range []string{
			record(now.Add(2 * DefaultTTL)), // exactly now + 2·TTL
			fmt.Sprintf(`{"version":1.0,"expires_at":%v}`, unixSeconds(now)+1),
			fmt.Sprintf(` {"expires_at":%v,"version":1,"extra":[1]} `, unixSeconds(now)+1),
		} {
			dir := t.TempDir()
			plant(t, dir, "x.json", content, 0o600)
			if !NewScanner(dir, Config{}).Active() {
				t.Errorf("record %s not counted", content)
			}
		}
	})
}

func TestScannerCachesAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s := NewScanner(dir, Config{})
		if s.Active() {
			t.Fatal("empty directory active")
		}
		plant(t, dir, "x.json", record(time.Now().Add(DefaultTTL)), 0o600)
		time.Sleep(DefaultCacheInterval - time.Millisecond)
		if s.Active() {
			t.Fatal("cached answer not reused inside CacheInterval")
		}
		time.Sleep(time.Millisecond)
		if !s.Active() {
			t.Fatal("answer not refreshed after CacheInterval")
		}
		if err := os.Remove(filepath.Join(dir, "x.json")); err != nil {
			t.Fatal(err)
		}
		s.Reset()
		if s.Active() {
			t.Fatal("Reset did not drop the cached answer")
		}
	})
}

func TestScannerMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if NewScanner(dir, Config{}).Active() {
		t.Fatal("missing directory active")
	}
}

func TestScanBoundedBy10000JunkFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range 10000 {
		var name, content string
		switch i % 4 {
		case 0:
			name, content = fmt.Sprintf("junk-%05d", i), "x"
		case 1:
			name, content = fmt.Sprintf("junk-%05d.json", i), "[]"
		case 2:
			name, content = fmt.Sprintf("junk-%05d.json", i), "garbage"
		case 3:
			name, content = fmt.Sprintf(".junk-%05d.tmp", i), ""
		}
		plant(t, dir, name, content, 0o600)
	}
	s := NewScanner(dir, Config{CacheInterval: -1})
	for range 3 {
		if s.Active() {
			t.Fatal("junk counted as a live lease")
		}
	}
	if n := len(listDir(t, dir)); n != 10000 {
		t.Fatalf("scan removed junk: %d entries left", n)
	}
}

func TestScanInspectsAtMostMaxEntries(t *testing.T) {
	// Records of crashed holders are removed as they are inspected, so the
	// number removed by one scan is the number of entries it inspected.
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		stale := record(time.Now().Add(-2*DefaultTTL - time.Second))
		for range 1000 {
			plant(t, dir, randomHex()+".json", stale, 0o600)
		}
		s := NewScanner(dir, Config{CacheInterval: -1})
		s.Active()
		if n := len(listDir(t, dir)); n != 1000-DefaultMaxEntries {
			t.Fatalf("one scan removed %d stale records, want %d", 1000-n, DefaultMaxEntries)
		}
	})
}

func TestStaleRecordsCannotHideLiveLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		stale := record(time.Now().Add(-2*DefaultTTL - time.Second))
		for range 200 {
			plant(t, dir, randomHex()+".json", stale, 0o600)
		}
		plant(t, dir, randomHex()+".json", record(time.Now().Add(DefaultTTL)), 0o600)
		s := NewScanner(dir, Config{CacheInterval: -1})
		// 201 entries: the first scan either finds the live lease or removes
		// 128 stale records, so the second sees every remaining entry.
		if !s.Active() && !s.Active() {
			t.Fatal("live lease hidden behind crashed holders' records")
		}
	})
}

func TestCloseKeepsForeignFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l, err := Hold(t.Context(), dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		// Something replaced the record with a directory: Close leaves it.
		l.stopRefresh()
		if err := os.Remove(l.Path()); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(l.Path(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(l.Path()); err != nil || !fi.IsDir() {
			t.Fatalf("Close removed a non-regular file: %v", err)
		}
	})
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"expires_at":1700000000.5}`, `[]`, `null`, `{}`, `{"version":true,"expires_at":1}`,
		`{"version":1,"expires_at":NaN}`, `{"version":1,"expires_at":1e400}`, `{"version":1.0,"expires_at":-1}`,
		"\x00", `{"version":1,"expires_at":1,"version":2}`, ` {"version":1,"expires_at":2} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		exp, ok := parseRecord(data)
		if !ok {
			return
		}
		if math.IsNaN(exp) || math.IsInf(exp, 0) {
			t.Fatalf("accepted non-finite expires_at %v from %q", exp, data)
		}
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			t.Fatalf("accepted a non-object %q", data)
		}
		if v, ok := obj["version"].(float64); !ok || v != 1 {
			t.Fatalf("accepted version %v in %q", obj["version"], data)
		}
	})
}

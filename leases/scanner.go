package leases

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Scanner reports whether another process holds a live lease in a
// directory. Create it with [NewScanner]; it is safe for concurrent use.
type Scanner struct {
	dir string
	cfg Config

	mu     sync.Mutex
	cached bool
	at     time.Time
	active bool
	buf    []byte   // getdents buffer, reused under mu
	names  []string // entry names of the current scan, reused under mu
	snap   dirSnap  // what the last full scan saw, for the unchanged-directory shortcut

	settled   time.Duration // settledAge; tests shorten it
	fullScans int           // full scans run, for tests
	// open opens a record; nil means syscall.Open. Tests inject failures.
	open func(path string, mode int, perm uint32) (int, error)
}

// dirSnap remembers the directory as the last full scan found it. While the
// directory is unchanged (same inode, mtime and ctime: every create, rename
// and unlink in it moves its mtime, a chmod or chown of the directory its
// ctime) the records it inspected are the same, so the answer follows from
// the expiries it saw and the clock alone, and a scan costs one lstat
// instead of a readdir and an open per record. Holders rewrite by rename,
// so a live holder changes the directory at every refresh anyway.
//
// Three guards keep the shortcut exact: the snapshot is trusted only when
// the directory's timestamps were already settledAge old when the full scan
// started (file-system timestamps are coarse: a change in the same tick as
// the scan would not move them); a scan that hit an I/O error (rather than
// a rule) on the directory or on a record is never reused; and a full scan
// runs at least once a TTL whatever the timestamps say. That last guard
// bounds how long a change made to a record in place by a foreign process
// (a write, chmod or chown of the file, which moves the file's timestamps,
// not the directory's; a Holder never does this) can go unseen.
type dirSnap struct {
	ok           bool
	dev, ino     uint64
	mtime, ctime syscall.Timespec
	scanned      time.Time // wall clock when the full scan started
	// live is the expiry of the live record that ended the scan, 0 if none.
	live float64
	// future lists expiries of well-formed records that were too far in the
	// future to count when the scan ran; they may come into range.
	future []float64
}

// settledAge is how old the directory's timestamps must be, when a full
// scan starts, for the snapshot to be trusted.
const settledAge = 100 * time.Millisecond

// answer returns the scan's answer for an unchanged directory at nowS, and
// false when only a full scan can tell (the live record it saw expired).
func (d *dirSnap) answer(nowS, ttlS float64) (active, ok bool) {
	if d.live > 0 {
		return true, nowS < d.live
	}
	for _, e := range d.future {
		if nowS < e && e <= nowS+2*ttlS {
			return true, true
		}
	}
	return false, true
}

// unchanged reports whether st shows the directory the snapshot describes,
// trustworthy at real time wall.
func (d *dirSnap) unchanged(st *syscall.Stat_t, wall time.Time, ttl, settledAge time.Duration) bool {
	if !d.ok || st.Dev != d.dev || st.Ino != d.ino || st.Mtim != d.mtime || st.Ctim != d.ctime {
		return false
	}
	age := wall.Sub(d.scanned)
	if age < 0 || age >= ttl {
		return false
	}
	settled := d.scanned.Add(-settledAge)
	return !time.Unix(d.mtime.Unix()).After(settled) && !time.Unix(d.ctime.Unix()).After(settled)
}

// NewScanner returns a scanner of dir. Nothing is read until
// [Scanner.Active].
func NewScanner(dir string, cfg Config) *Scanner {
	return &Scanner{dir: dir, cfg: cfg, settled: settledAge}
}

// Active reports whether dir holds at least one live lease. The answer is
// reused for [Config.CacheInterval]; otherwise Active scans at most
// [Config.MaxEntries] entries, stops at the first live lease and removes
// records of crashed holders on the way. A directory unchanged since the
// last full scan (see dirSnap) is answered from what that scan saw, at the
// cost of one lstat. A missing or unsafe directory, or any error, reads as
// no lease.
func (s *Scanner) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.now()
	if iv := s.cfg.cacheInterval(); s.cached && iv > 0 {
		if age := now.Sub(s.at); age >= 0 && age < iv {
			return s.active
		}
	}
	s.active = s.scan(now)
	s.cached, s.at = true, now
	return s.active
}

// Reset drops the cached answer and what the last scan saw, so the next
// Active reads the directory.
func (s *Scanner) Reset() {
	s.mu.Lock()
	s.cached = false
	s.snap.ok = false
	s.mu.Unlock()
}

// scan reads one bounded batch of directory entries.
func (s *Scanner) scan(now time.Time) bool {
	nowS := unixSeconds(now)
	ttlS := s.cfg.ttl().Seconds()
	wall := time.Now()
	var lst syscall.Stat_t
	if syscall.Lstat(s.dir, &lst) == nil && checkDirStat(&lst) == nil && lst.Mode&0o7777 == 0o700 &&
		s.snap.unchanged(&lst, wall, s.cfg.ttl(), s.settled) {
		if active, ok := s.snap.answer(nowS, ttlS); ok {
			return active
		}
	}
	s.snap.ok = false
	s.fullScans++
	if prepareDir(s.dir) != nil {
		return false
	}
	fd, err := syscall.Open(s.dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || checkDirStat(&st) != nil {
		return false
	}
	s.snap = dirSnap{ok: true, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim,
		scanned: wall, future: s.snap.future[:0]}
	entries, complete := s.readNames(fd, s.cfg.maxEntries())
	if !complete {
		// A failed read of the directory saw only part of it: answer from
		// what it saw, but never reuse that view.
		s.snap.ok = false
	}
	open := s.open
	if open == nil {
		open = syscall.Open
	}
	for _, name := range entries {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(s.dir, name)
		exp, ok, certain := readRecord(path, open)
		if !certain {
			// An I/O error (no file descriptor left, EIO, …), not a rule,
			// rejected the record: it may count at the next scan, so the
			// unchanged-directory shortcut must not answer for it.
			s.snap.ok = false
		}
		if !ok {
			continue
		}
		if nowS < exp && exp <= nowS+2*ttlS {
			s.snap.live = exp
			return true
		}
		if exp > nowS {
			s.snap.future = append(s.snap.future, exp)
		}
		if exp < nowS-2*ttlS {
			// A crashed holder's record: it can never become live again.
			if err := removeOwned(path); err != nil {
				s.cfg.logger().Debug("leases: remove stale record", "path", path, "err", err)
			}
			// The removal changed the directory: the next scan reads it again.
			s.snap.ok = false
		}
	}
	return false
}

// readNames returns the names of at most limit entries of the open
// directory fd, in directory order, and whether the read ended without an
// error. It reads with getdents into a fixed buffer, so the work is bounded
// by limit, not by the directory's size (the spec's
// (*os.File).ReadDir(128), without the per-entry allocations).
func (s *Scanner) readNames(fd, limit int) (names []string, complete bool) {
	if s.buf == nil {
		s.buf = make([]byte, 2048)
	}
	names, complete = s.names[:0], true
	for len(names) < limit {
		n, err := syscall.Getdents(fd, s.buf)
		if err != nil {
			complete = false
			break
		}
		if n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(s.buf[:n], limit-len(names), names)
	}
	s.names = names
	return names, complete
}

// readRecord applies the spec's checks 1–5 to path and returns its expiry.
// certain is false when a system call failed for a reason other than the
// rules (a record refused for what it is stays refused until the directory
// changes; one refused for an error may count next time).
func readRecord(path string, open func(string, int, uint32) (int, error)) (exp float64, ok, certain bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, false, false
	}
	if !privateRegular(&st) {
		return 0, false, true
	}
	fd, err := open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		// ELOOP: swapped for a symlink since the lstat; EACCES, EPERM: what
		// the file is (only a chmod of the file, which a holder never does,
		// changes it). Anything else may pass.
		rule := errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
		return 0, false, rule
	}
	defer syscall.Close(fd)
	var fst syscall.Stat_t
	if err := syscall.Fstat(fd, &fst); err != nil {
		return 0, false, false
	}
	if !privateRegular(&fst) || fst.Ino != st.Ino || fst.Dev != st.Dev {
		return 0, false, true
	}
	var buf [MaxRecordSize + 1]byte
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil {
			return 0, false, false
		}
		if m <= 0 {
			break
		}
		n += m
	}
	exp, ok = parseRecord(buf[:n])
	return exp, ok, true
}

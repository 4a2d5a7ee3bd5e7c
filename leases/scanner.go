package leases

import (
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
}

// NewScanner returns a scanner of dir. Nothing is read until
// [Scanner.Active].
func NewScanner(dir string, cfg Config) *Scanner {
	return &Scanner{dir: dir, cfg: cfg}
}

// Active reports whether dir holds at least one live lease. The answer is
// reused for [Config.CacheInterval]; otherwise Active scans at most
// [Config.MaxEntries] entries, stops at the first live lease and removes
// records of crashed holders on the way. A missing or unsafe directory, or
// any error, reads as no lease.
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

// Reset drops the cached answer, so the next Active scans.
func (s *Scanner) Reset() {
	s.mu.Lock()
	s.cached = false
	s.mu.Unlock()
}

// scan reads one bounded batch of directory entries.
func (s *Scanner) scan(now time.Time) bool {
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
	entries := s.readNames(fd, s.cfg.maxEntries())
	nowS := unixSeconds(now)
	ttlS := s.cfg.ttl().Seconds()
	for _, name := range entries {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(s.dir, name)
		exp, ok := readRecord(path)
		if !ok {
			continue
		}
		if nowS < exp && exp <= nowS+2*ttlS {
			return true
		}
		if exp < nowS-2*ttlS {
			// A crashed holder's record: it can never become live again.
			if err := removeOwned(path); err != nil {
				s.cfg.logger().Debug("leases: remove stale record", "path", path, "err", err)
			}
		}
	}
	return false
}

// readNames returns the names of at most limit entries of the open
// directory fd, in directory order. It reads with getdents into a fixed
// buffer, so the work is bounded by limit, not by the directory's size (the
// spec's (*os.File).ReadDir(128), without the per-entry allocations).
func (s *Scanner) readNames(fd, limit int) []string {
	if s.buf == nil {
		s.buf = make([]byte, 2048)
	}
	names := s.names[:0]
	for len(names) < limit {
		n, err := syscall.Getdents(fd, s.buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(s.buf[:n], limit-len(names), names)
	}
	s.names = names
	return names
}

// readRecord applies the spec's checks 1–5 to path and returns its expiry.
func readRecord(path string) (float64, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || !privateRegular(&st) {
		return 0, false
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false
	}
	defer syscall.Close(fd)
	var fst syscall.Stat_t
	if syscall.Fstat(fd, &fst) != nil || !privateRegular(&fst) || fst.Ino != st.Ino || fst.Dev != st.Dev {
		return 0, false
	}
	var buf [MaxRecordSize + 1]byte
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if m <= 0 || err != nil {
			break
		}
		n += m
	}
	return parseRecord(buf[:n])
}

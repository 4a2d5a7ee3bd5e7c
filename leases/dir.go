package leases

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// prepareDir creates dir with mode 0700 (parents too), refuses a symlink, a
// non-directory or another user's directory, and tightens its mode to 0700.
func prepareDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: empty path", ErrUnsafeDir)
	}
	var st syscall.Stat_t
	err := syscall.Lstat(dir, &st)
	if errors.Is(err, syscall.ENOENT) {
		if err = os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("%w: %w", ErrUnsafeDir, err)
		}
		err = syscall.Lstat(dir, &st)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeDir, dir, err)
	}
	if err := checkDirStat(&st); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeDir, dir, err)
	}
	if st.Mode&0o7777 != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeDir, dir, err)
		}
	}
	return nil
}

var (
	errSymlink  = errors.New("is a symlink")
	errNotDir   = errors.New("not a directory")
	errNotOwner = errors.New("owned by another user")
)

func checkDirStat(st *syscall.Stat_t) error {
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
	case syscall.S_IFLNK:
		return errSymlink
	default:
		return errNotDir
	}
	if int(st.Uid) != os.Geteuid() {
		return errNotOwner
	}
	return nil
}

// privateRegular reports whether st describes a regular file owned by this
// user with no group or other permission bits and at most MaxRecordSize
// bytes: the checks of spec step 1, repeated after the open.
func privateRegular(st *syscall.Stat_t) bool {
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG &&
		int(st.Uid) == os.Geteuid() &&
		st.Mode&0o077 == 0 &&
		st.Size >= 0 && st.Size <= MaxRecordSize
}

// removeOwned unlinks path only if it is a regular file owned by this user.
// A missing file is not an error.
func removeOwned(path string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Geteuid() {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// randomHex returns 32 random hex digits.
func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux.
	return hex.EncodeToString(b[:])
}

// writeAtomic writes data to dir/name through a private temp file: opened
// O_EXCL|O_NOFOLLOW with mode 0600, written, fsynced, closed and renamed
// over the target; then the directory is fsynced (best effort). The temp
// file never survives.
func writeAtomic(dir, name string, data []byte) (err error) {
	tmp := filepath.Join(dir, "."+name+"."+randomHex()+".tmp")
	fd, err := syscall.Open(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("leases: create temp file: %w", err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("leases: write temp file: %w", err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("leases: sync temp file: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("leases: close temp file: %w", err)
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("leases: rename: %w", err)
	}
	syncDir(dir)
	return nil
}

// syncDir fsyncs dir, best effort.
func syncDir(dir string) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	_ = syscall.Fsync(fd)
	_ = syscall.Close(fd)
}

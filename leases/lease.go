package leases

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// Lease is one foreground lease record held by this process. It is created
// by [Hold] and refreshed until [Lease.Close].
type Lease struct {
	dir, name string
	cfg       Config
	log       *slog.Logger

	stopOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{}
	done      chan struct{}
}

// Hold writes a new lease record into dir and starts refreshing it every
// cfg.Refresh with an expiry of now + cfg.TTL. ctx bounds only the first,
// synchronous write: when ctx is done before it completes Hold returns
// ctx.Err() and leaves nothing behind. The refresher runs until
// [Lease.Close]; refresh failures are logged and swallowed (the record then
// expires after TTL). An unsafe directory gives an error wrapping
// [ErrUnsafeDir] and nothing is written.
func Hold(ctx context.Context, dir string, cfg Config) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	l := &Lease{
		dir:  dir,
		name: randomHex() + ".json",
		cfg:  cfg,
		log:  cfg.logger(),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if err := l.write(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = removeOwned(l.Path())
		return nil, err
	}
	go l.refresh()
	return l, nil
}

// Path returns the path of the lease record.
func (l *Lease) Path() string { return filepath.Join(l.dir, l.name) }

// write checks the directory and atomically rewrites the record.
func (l *Lease) write() error {
	if err := prepareDir(l.dir); err != nil {
		return err
	}
	return writeAtomic(l.dir, l.name, encodeRecord(l.cfg.now().Add(l.cfg.ttl())))
}

// refresh rewrites the record every Refresh until Close.
func (l *Lease) refresh() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.refresh())
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.write(); err != nil {
				l.log.Debug("leases: refresh failed", "path", l.Path(), "err", err)
			}
		}
	}
}

// stopRefresh stops the refresher and waits for it; it is idempotent.
func (l *Lease) stopRefresh() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// Close stops the refresher and removes the record, only if it is still a
// regular file owned by this user. Close is idempotent: later calls return
// the first call's result.
func (l *Lease) Close() error {
	l.closeOnce.Do(func() {
		l.stopRefresh()
		if err := prepareDir(l.dir); err != nil {
			l.closeErr = err
			return
		}
		if err := removeOwned(l.Path()); err != nil {
			l.closeErr = fmt.Errorf("leases: remove %s: %w", l.Path(), err)
		}
	})
	return l.closeErr
}

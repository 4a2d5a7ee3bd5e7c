package store

import (
	"context"
	"time"

	"go.etcd.io/bbolt"
)

// op is one queued mutation. fn runs inside the writer's transaction; it
// must check everything it can before it writes, and return an error only
// for a condition it could not check before (a bbolt error, a merged value
// over its limit). A nil fn is a barrier: it completes once every op queued
// before it has committed.
type op struct {
	fn   func(tx *bbolt.Tx) (any, error)
	res  any
	err  error
	done chan struct{}
}

// writer owns all write transactions of one shard.
//
// Group commit: the writer takes the first queued op, drains whatever else
// is queued (up to maxBatch), lingers briefly for more when the previous
// commit was shared, and runs the batch in one bbolt transaction with one
// fsync. Per-op isolation: when an op fails, the transaction is rolled back,
// that op alone gets its error and the rest of the batch is run again in a
// fresh transaction (ops are pure functions of the transaction, so running
// one again is safe; the results of the discarded run are dropped). No
// caller ever sees another op's error, and none is acknowledged before its
// commit returned.
type writer struct {
	shard    int
	db       *bbolt.DB
	ch       chan *op
	maxBatch int
	linger   time.Duration
	m        *metrics
	done     chan struct{}
}

func (w *writer) run() {
	defer close(w.done)
	batch := make([]*op, 0, w.maxBatch)
	last := 0
	for {
		first, ok := <-w.ch
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		open := true
	drain:
		for len(batch) < w.maxBatch {
			select {
			case o, ok := <-w.ch:
				if !ok {
					open = false
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		if open && w.linger > 0 && last > 1 && len(batch) < w.maxBatch {
			t := time.NewTimer(w.linger)
		linger:
			for len(batch) < w.maxBatch {
				select {
				case o, ok := <-w.ch:
					if !ok {
						open = false
						break linger
					}
					batch = append(batch, o)
				case <-t.C:
					break linger
				}
			}
			t.Stop()
		}
		w.commit(batch)
		last = len(batch)
		clear(batch)
		if !open {
			return
		}
	}
}

func finish(o *op, res any, err error) {
	o.res, o.err = res, err
	close(o.done)
}

func (w *writer) commit(batch []*op) {
	start := time.Now()
	n := len(batch)
	pending := batch
	results := make([]any, len(batch))
	for len(pending) > 0 {
		tx, err := w.db.Begin(true)
		if err != nil {
			for _, o := range pending {
				finish(o, nil, err)
			}
			break
		}
		failed := -1
		var ferr error
		for i, o := range pending {
			if o.fn == nil {
				results[i] = nil
				continue
			}
			r, err := o.fn(tx)
			if err != nil {
				failed, ferr = i, err
				break
			}
			results[i] = r
		}
		if failed >= 0 {
			_ = tx.Rollback()
			finish(pending[failed], nil, ferr)
			rest := make([]*op, 0, len(pending)-1)
			rest = append(rest, pending[:failed]...)
			pending = append(rest, pending[failed+1:]...)
			continue
		}
		err = tx.Commit()
		for i, o := range pending {
			if err != nil {
				finish(o, nil, err)
			} else {
				finish(o, results[i], nil)
			}
		}
		break
	}
	ctx := context.Background()
	w.m.batchOps.Record(ctx, int64(n), w.m.attrs[w.shard])
	w.m.commit.Record(ctx, time.Since(start).Seconds(), w.m.attrs[w.shard])
}

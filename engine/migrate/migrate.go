// Package migrate is the offline shard migration behind
// "edict migrate-shards": it rewrites a stopped engine's shard files
// (graph-<n>.db, or the retired single graph.db) into a new shard count K.
//
// Every row is copied verbatim (nothing is decoded): each graph bucket goes
// to the shard the engine will look for it in at the new K — its tenant
// catalog entry if catalog.db has one (catalog.ResolveShard), else the hash
// route — and any non-graph record to the new shard 0. Each destination
// shard is written in one durable transaction that scans all sources.
//
// In place (the default) the new files are built in <dir>/.shard-migrate-tmp,
// the old ones moved to <dir>/.shard-migrate-backup-<unix seconds>/ (kept),
// and the new ones renamed into place. With a destination directory the new
// files (and a copy of catalog.db) are written there; a destination that
// already holds a shard file is refused. The engine must be stopped: bbolt's
// file lock makes Run fail (after a timeout) against a running engine.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/catalog"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/store"
)

// Errors of Run.
var (
	// ErrNoShards reports a source without shard files.
	ErrNoShards = errors.New("migrate: no shard files found")
	// ErrMixed reports a source holding both graph.db and graph-<n>.db.
	ErrMixed = errors.New("migrate: mixed retired and current shard layouts")
	// ErrExists reports a destination that already holds a shard file.
	ErrExists = errors.New("migrate: destination shard file already exists")
	// ErrShards reports a shard count outside 1..64.
	ErrShards = errors.New("migrate: shard count must be in 1..64")
)

// Names of the working directories inside an engine directory.
const (
	TmpDir       = ".shard-migrate-tmp"
	BackupPrefix = ".shard-migrate-backup-"
)

// Config describes one migration.
type Config struct {
	// Src is the engine directory holding the shard files (the data
	// directory's engine/ subdirectory).
	Src string
	// Dest is the engine directory to write; "" means in place.
	Dest string
	// Shards is the new shard count K, 1..64.
	Shards int
	// Progress, if not nil, is called with the buckets copied so far and
	// their total, after each one.
	Progress func(done, total int)
	// Now supplies the time of the backup directory's name; nil means
	// time.Now.
	Now func() time.Time
}

// Report counts what a migration copied. Rows are counted per bucket kind
// of a graph (nodes, edges, kv, ...); Global counts rows of non-graph
// records.
type Report struct {
	Source, Dest             string
	SourceShards, DestShards int
	Graphs                   int
	Nodes, Edges, KV         int
	Labels, Reverse, Meta    int
	Global                   int
	// Backup is the directory holding the old files (in place only).
	Backup string
}

// String is the success line: migration OK: {src} -> {dst} shards | counts.
func (r Report) String() string {
	return fmt.Sprintf("migration OK: %d -> %d shards | graphs=%d nodes=%d edges=%d kv=%d labels=%d reverse_edges=%d meta=%d global=%d",
		r.SourceShards, r.DestShards, r.Graphs, r.Nodes, r.Edges, r.KV, r.Labels, r.Reverse, r.Meta, r.Global)
}

// Sources returns the source shard files of dir in shard order: a
// contiguous graph-<n>.db set, or the retired graph.db alone.
func Sources(dir string) ([]string, error) {
	retired := filepath.Join(dir, store.RetiredFile)
	_, rerr := os.Stat(retired)
	hasRetired := rerr == nil
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("%w under %s", ErrNoShards, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", dir, err)
	}
	current := false
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "graph-") && strings.HasSuffix(e.Name(), ".db") {
			current = true
		}
	}
	switch {
	case hasRetired && current:
		return nil, fmt.Errorf("%w in %s (graph.db and graph-<n>.db): keep one", ErrMixed, dir)
	case hasRetired:
		return []string{retired}, nil
	case !current:
		return nil, fmt.Errorf("%w under %s", ErrNoShards, dir)
	}
	k, err := store.DiscoverShards(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, k)
	for i := range out {
		out[i] = filepath.Join(dir, store.ShardFile(i))
	}
	return out, nil
}

func refuseExisting(dir string) error {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if n == store.RetiredFile || strings.HasPrefix(n, "graph-") && strings.HasSuffix(n, ".db") {
			return fmt.Errorf("%w: %s (refusing to overwrite)", ErrExists, filepath.Join(dir, n))
		}
	}
	return nil
}

func openDB(path string, readOnly bool) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second, ReadOnly: readOnly})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			err = fmt.Errorf("%w (is the engine still running? stop it first)", err)
		}
		return nil, fmt.Errorf("migrate: open %s: %w", path, err)
	}
	return db, nil
}

// Run performs the migration. ctx is checked between buckets; a cancelled
// or failed run leaves the source untouched (in place, the temporary
// directory is removed).
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	if cfg.Shards < 1 || cfg.Shards > store.MaxShards {
		return rep, fmt.Errorf("%w (got %d)", ErrShards, cfg.Shards)
	}
	srcs, err := Sources(cfg.Src)
	if err != nil {
		return rep, err
	}
	inPlace := cfg.Dest == "" || sameDir(cfg.Src, cfg.Dest)
	out := cfg.Dest
	if inPlace {
		out = filepath.Join(cfg.Src, TmpDir)
		if err := os.RemoveAll(out); err != nil {
			return rep, fmt.Errorf("migrate: clear %s: %w", out, err)
		}
	} else {
		if err := refuseExisting(out); err != nil {
			return rep, err
		}
		if _, err := os.Stat(filepath.Join(out, catalog.FileName)); err == nil {
			return rep, fmt.Errorf("%w: %s (refusing to overwrite)", ErrExists, filepath.Join(out, catalog.FileName))
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rep, fmt.Errorf("migrate: create %s: %w", out, err)
	}
	if inPlace {
		defer func() {
			if err != nil {
				os.RemoveAll(out)
			}
		}()
	}
	rep = Report{Source: cfg.Src, Dest: cfg.Dest, SourceShards: len(srcs), DestShards: cfg.Shards}
	if inPlace {
		rep.Dest = cfg.Src
	}

	var cat *catalog.Catalog
	catPath := filepath.Join(cfg.Src, catalog.FileName)
	if _, err := os.Stat(catPath); err == nil {
		if cat, err = catalog.Open(catPath); err != nil {
			return rep, fmt.Errorf("migrate: %w", err)
		}
	}
	resolve := func(g string, k int) int { return cat.ResolveShard(g, k) }

	dbs := make([]*bbolt.DB, len(srcs))
	defer func() {
		for _, db := range dbs {
			if db != nil {
				db.Close()
			}
		}
		if cat != nil {
			cat.Close()
		}
	}()
	total := 0
	for i, p := range srcs {
		if dbs[i], err = openDB(p, true); err != nil {
			return rep, err
		}
		if err := dbs[i].View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func([]byte, *bbolt.Bucket) error { total++; return nil })
		}); err != nil {
			return rep, err
		}
	}
	done := 0
	oldK := len(srcs)
	for j := range cfg.Shards {
		dp := filepath.Join(out, store.ShardFile(j))
		ddb, err := openDB(dp, false)
		if err != nil {
			return rep, err
		}
		err = ddb.Update(func(tx *bbolt.Tx) error {
			for i, sdb := range dbs {
				err := sdb.View(func(stx *bbolt.Tx) error {
					return stx.ForEach(func(name []byte, sb *bbolt.Bucket) error {
						if err := ctx.Err(); err != nil {
							return err
						}
						g := string(name)
						isGraph := protocol.ValidName(g)
						switch {
						case isGraph && resolve(g, oldK) != i:
							// A leftover of an interrupted online move:
							// the engine never reads it.
							if j == 0 {
								done++
							}
							return nil
						case isGraph && resolve(g, cfg.Shards) != j, !isGraph && j != 0:
							return nil
						}
						if tx.Bucket(name) != nil {
							return fmt.Errorf("migrate: bucket %q found twice", g)
						}
						nb, err := tx.CreateBucket(name)
						if err != nil {
							return err
						}
						counts := map[string]int{}
						if err := store.CopyBucket(nb, sb, counts); err != nil {
							return err
						}
						if isGraph {
							rep.Graphs++
							rep.Nodes += counts["nodes"]
							rep.Edges += counts["out"]
							rep.KV += counts["kv"]
							rep.Labels += counts["labels"]
							rep.Reverse += counts["in"]
							rep.Meta += counts["meta"]
						} else {
							for _, n := range counts {
								rep.Global += n
							}
						}
						done++
						if cfg.Progress != nil {
							cfg.Progress(done, total)
						}
						return nil
					})
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			err = store.CheckDB(ddb)
		}
		if cerr := ddb.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return rep, fmt.Errorf("migrate: write %s: %w", dp, err)
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(total, total)
	}
	for i, db := range dbs {
		db.Close()
		dbs[i] = nil
	}
	if cat != nil {
		cat.Close()
		cat = nil
	}

	if !inPlace {
		if _, err := os.Stat(catPath); err == nil {
			if err := copyFile(catPath, filepath.Join(out, catalog.FileName)); err != nil {
				return rep, err
			}
		}
		return rep, syncDir(out)
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	backup := filepath.Join(cfg.Src, fmt.Sprintf("%s%d", BackupPrefix, now().Unix()))
	if err := os.Mkdir(backup, 0o755); err != nil {
		return rep, fmt.Errorf("migrate: create backup %s: %w", backup, err)
	}
	for _, p := range srcs {
		if err := os.Rename(p, filepath.Join(backup, filepath.Base(p))); err != nil {
			return rep, fmt.Errorf("migrate: move %s to the backup (the backup holds what was moved; move it back to undo): %w", p, err)
		}
	}
	for j := range cfg.Shards {
		name := store.ShardFile(j)
		if err := os.Rename(filepath.Join(out, name), filepath.Join(cfg.Src, name)); err != nil {
			return rep, fmt.Errorf("migrate: install %s (old files are in %s): %w", name, backup, err)
		}
	}
	rep.Backup = backup
	if err := os.RemoveAll(out); err != nil {
		return rep, err
	}
	return rep, syncDir(cfg.Src)
}

func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && filepath.Clean(aa) == filepath.Clean(bb)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	if err := o.Sync(); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

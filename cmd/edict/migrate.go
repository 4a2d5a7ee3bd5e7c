package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/edictrt/edict/engine/migrate"
)

// runMigrateShards rewrites a stopped engine's shard files into a new shard
// count: edict migrate-shards --data DIR --shards K [--dest DIR].
func runMigrateShards(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict migrate-shards", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defData := os.Getenv("EDICT_DATA_DIR")
	if defData == "" {
		defData = "./edict-data"
	}
	data := fs.String("data", defData, "data directory `DIR` of the stopped engine (the one given to edict serve --data); shards are read from DIR/engine (env EDICT_DATA_DIR)")
	shards := fs.Int("shards", 0, "new shard count `K`, 1..64 (required)")
	dest := fs.String("dest", "", "write the new shards to `DIR`/engine instead of in place; refused if it already holds shard files (default: in place, old files kept in DIR/engine/.shard-migrate-backup-<unix>/)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: edict migrate-shards --data DIR --shards K [--dest DIR]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Changes the shard count of a STOPPED engine: every graph, node, edge and KV row is")
		fmt.Fprintln(w, "copied verbatim into graph-0.db .. graph-<K-1>.db, each graph to the shard the engine")
		fmt.Fprintln(w, "routes it to (its tenant-catalog entry, else the hash). Prints per-table counts.")
		fmt.Fprintln(w, "Exit status: 0 on success, 1 on failure, 2 on bad usage.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "flags:")
		fs.PrintDefaults()
	}
	if code, ok := parseCommand(fs, args, stdout, stderr); !ok {
		if code == 2 && fs.NArg() > 0 {
			fs.Usage()
		}
		return code
	}
	if *shards < 1 || *shards > 64 {
		fmt.Fprintln(stderr, "edict migrate-shards: --shards K is required, 1..64")
		fs.Usage()
		return 2
	}
	if *data == "" {
		fmt.Fprintln(stderr, "edict migrate-shards: --data DIR is required")
		fs.Usage()
		return 2
	}
	cfg := migrate.Config{Src: filepath.Join(*data, "engine"), Shards: *shards}
	if *dest != "" {
		cfg.Dest = filepath.Join(*dest, "engine")
	}
	var bar *progressbar.ProgressBar
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		cfg.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total,
					progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("migrating graphs"),
					progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(done)
		}
	}
	rep, err := migrate.Run(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		fmt.Fprintf(stderr, "edict migrate-shards: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, rep.String())
	if rep.Backup != "" {
		fmt.Fprintf(stdout, "old shard files kept in %s\n", rep.Backup)
	} else {
		fmt.Fprintf(stdout, "new shard files in %s\n", rep.Dest)
	}
	return 0
}

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ShardFile returns the file name of shard n: graph-<n>.db.
func ShardFile(n int) string { return "graph-" + strconv.Itoa(n) + ".db" }

// RetiredFile is the single-file layout that only edict migrate-shards
// reads.
const RetiredFile = "graph.db"

const fix = "run the offline migrate-shards command (edict migrate-shards) before startup"

// DiscoverShards returns the shard count found in dir: 0 when it holds no
// shard file, else K for a valid graph-0.db .. graph-<K-1>.db set. Any other
// layout is an error wrapping ErrLayout that names the fix. A missing dir
// counts as empty.
func DiscoverShards(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", dir, err)
	}
	var found []int
	for _, e := range ents {
		name := e.Name()
		if name == RetiredFile {
			return 0, fmt.Errorf("%w: retired shard layout detected (graph.db) in %s; %s", ErrLayout, dir, fix)
		}
		if !strings.HasPrefix(name, "graph-") || !strings.HasSuffix(name, ".db") {
			continue
		}
		mid := strings.TrimSuffix(strings.TrimPrefix(name, "graph-"), ".db")
		n, err := strconv.Atoi(mid)
		if err != nil || n < 0 || mid == "" || strings.TrimLeft(mid, "0123456789") != "" {
			return 0, fmt.Errorf("%w: invalid shard file name %s in %s; %s", ErrLayout, name, dir, fix)
		}
		if strconv.Itoa(n) != mid {
			return 0, fmt.Errorf("%w: non-canonical shard file name %s in %s (want %s); %s", ErrLayout, name, dir, ShardFile(n), fix)
		}
		if n >= MaxShards {
			return 0, fmt.Errorf("%w: shard file %s in %s is beyond the %d-shard maximum; %s", ErrLayout, name, dir, MaxShards, fix)
		}
		info, err := e.Info()
		if err != nil {
			return 0, fmt.Errorf("store: stat %s: %w", filepath.Join(dir, name), err)
		}
		if !info.Mode().IsRegular() {
			return 0, fmt.Errorf("%w: shard file %s in %s is not a regular file; %s", ErrLayout, name, dir, fix)
		}
		found = append(found, n)
	}
	if len(found) == 0 {
		return 0, nil
	}
	slices.Sort(found)
	for i, n := range found {
		if n != i {
			return 0, fmt.Errorf("%w: non-contiguous shard files in %s (%s missing); %s", ErrLayout, dir, ShardFile(i), fix)
		}
	}
	return len(found), nil
}

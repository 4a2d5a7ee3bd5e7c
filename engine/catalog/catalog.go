// Package catalog is the engine's tenant catalog: the durable exceptions to
// the hash route that places each graph on a shard.
//
// A graph without an entry lives on HashShard(graph, K) (FNV-1a 64 over its
// sanitized name, mod K); an entry {shard, node} overrides that, and is how
// online reshard and the rebalancer move a graph. An empty catalog therefore
// routes byte-for-byte like no catalog at all.
//
// Entries live in catalog.db (bbolt), bucket "tenant_catalog", graph →
// {"shard":u32,"node":u32|null}. Open loads every row into memory and fails
// on more than MaxEntries rows or on an invalid row. Writes are durable
// (fsync) before memory changes, so a reader never sees a route that a crash
// could take back. A Catalog is safe for concurrent use.
package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/bbolt"
)

// Limits of the catalog.
const (
	MaxEntries  = 1_000_000
	MaxKeyBytes = 4 << 10
)

// FileName is the catalog's file name inside the engine directory.
const FileName = "catalog.db"

var bucketName = []byte("tenant_catalog")

// Assignment places a graph on a shard of a node; Node nil means this node.
type Assignment struct {
	Shard uint32  `json:"shard"`
	Node  *uint32 `json:"node"`
}

// Entry is one catalog row.
type Entry struct {
	Graph string
	Assignment
}

// Catalog is an open tenant catalog.
type Catalog struct {
	db *bbolt.DB

	wmu sync.Mutex // serializes writes: db first, then memory
	mu  sync.RWMutex
	m   map[string]Assignment
}

// Open opens (creating if needed) the catalog file at path and loads its
// entries.
func Open(path string) (*Catalog, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{})
	if err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	c := &Catalog{db: db, m: map[string]Assignment{}}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketName)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			if len(c.m) >= MaxEntries {
				return ErrFull
			}
			if err := validKey(string(k)); err != nil {
				return err
			}
			a, err := DecodeAssignment(v)
			if err != nil {
				return fmt.Errorf("%w: graph %q: %v", ErrInvalid, k, err)
			}
			c.m[string(k)] = a
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("catalog: load %s: %w", path, err)
	}
	return c, nil
}

// Close closes the file. It is idempotent.
func (c *Catalog) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	return err
}

func validKey(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("%w: empty graph", ErrInvalid)
	case len(g) > MaxKeyBytes:
		return fmt.Errorf("%w: graph longer than %d bytes", ErrInvalid, MaxKeyBytes)
	case strings.IndexByte(g, 0) >= 0:
		return fmt.Errorf("%w: graph contains NUL", ErrInvalid)
	}
	return nil
}

// DecodeAssignment decodes a stored row: exactly one JSON object
// {"shard":u32,"node":u32|null} with no other field.
func DecodeAssignment(v []byte) (Assignment, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	var raw struct {
		Shard *uint32 `json:"shard"`
		Node  *uint32 `json:"node"`
	}
	if err := dec.Decode(&raw); err != nil {
		return Assignment{}, err
	}
	if dec.More() {
		return Assignment{}, errors.New("trailing data")
	}
	if _, err := dec.Token(); err == nil {
		return Assignment{}, errors.New("trailing data")
	}
	if raw.Shard == nil {
		return Assignment{}, errors.New("missing shard")
	}
	return Assignment{Shard: *raw.Shard, Node: raw.Node}, nil
}

// Lookup returns the entry of graph, if any.
func (c *Catalog) Lookup(graph string) (Assignment, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.m[graph]
	return a, ok
}

// ResolveShard routes graph among k shards (k < 1 counts as 1): its entry's
// shard % k, else HashShard(graph, k).
func (c *Catalog) ResolveShard(graph string, k int) int {
	k = max(k, 1)
	if c != nil {
		if a, ok := c.Lookup(graph); ok {
			return int(a.Shard % uint32(k))
		}
	}
	return HashShard(graph, k)
}

// Assign durably sets graph's entry, then updates memory. ctx is checked
// before writing; a write in progress is not interrupted.
func (c *Catalog) Assign(ctx context.Context, graph string, shard uint32, node *uint32) error {
	if err := validKey(graph); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.db == nil {
		return ErrClosed
	}
	c.mu.RLock()
	_, exists := c.m[graph]
	n := len(c.m)
	c.mu.RUnlock()
	if !exists && n >= MaxEntries {
		return ErrFull
	}
	var nd *uint32
	if node != nil {
		v := *node
		nd = &v
	}
	a := Assignment{Shard: shard, Node: nd}
	v, _ := json.Marshal(a)
	if err := c.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketName).Put([]byte(graph), v)
	}); err != nil {
		return fmt.Errorf("catalog: assign %s: %w", graph, err)
	}
	c.mu.Lock()
	c.m[graph] = a
	c.mu.Unlock()
	return nil
}

// Reassign moves graph's entry to shard, keeping its node. A graph without
// an entry gets one with a nil node.
func (c *Catalog) Reassign(ctx context.Context, graph string, shard uint32) error {
	a, _ := c.Lookup(graph)
	return c.Assign(ctx, graph, shard, a.Node)
}

// Remove durably deletes graph's entry (its route goes back to the hash).
// Removing an absent entry is not an error.
func (c *Catalog) Remove(ctx context.Context, graph string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.db == nil {
		return ErrClosed
	}
	if err := c.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketName).Delete([]byte(graph))
	}); err != nil {
		return fmt.Errorf("catalog: remove %s: %w", graph, err)
	}
	c.mu.Lock()
	delete(c.m, graph)
	c.mu.Unlock()
	return nil
}

// Len returns the number of entries.
func (c *Catalog) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Entries returns every entry, sorted by graph.
func (c *Catalog) Entries() []Entry {
	c.mu.RLock()
	keys := slices.Sorted(maps.Keys(c.m))
	out := make([]Entry, len(keys))
	for i, k := range keys {
		out[i] = Entry{Graph: k, Assignment: c.m[k]}
	}
	c.mu.RUnlock()
	return out
}

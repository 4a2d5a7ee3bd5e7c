package catalog_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"go.etcd.io/bbolt"

	"github.com/edictrt/edict/engine/catalog"
)

func openCat(t *testing.T, path string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestEmptyIsHash(t *testing.T) {
	c := openCat(t, filepath.Join(t.TempDir(), catalog.FileName))
	for _, k := range []int{1, 2, 4, 8, 16} {
		for i := range 200 {
			g := fmt.Sprintf("graph-%d", i)
			h := fnv.New64a()
			h.Write([]byte(g))
			want := int(h.Sum64() % uint64(k))
			if got := c.ResolveShard(g, k); got != want || catalog.HashShard(g, k) != want {
				t.Fatalf("K=%d %s: %d, want %d", k, g, got, want)
			}
		}
	}
}

func TestAssignReassignRemoveDurable(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), catalog.FileName)
	c, err := catalog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	node := uint32(3)
	if err := c.Assign(ctx, "a", 9, &node); err != nil {
		t.Fatal(err)
	}
	if got := c.ResolveShard("a", 4); got != 1 {
		t.Errorf("9 %% 4 = %d", got)
	}
	if err := c.Reassign(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(ctx, "b", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(ctx, "gone", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a\x00b", strings.Repeat("k", catalog.MaxKeyBytes+1)} {
		if err := c.Assign(ctx, bad, 0, nil); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("assign %q: %v", bad, err)
		}
	}
	c.Close()
	c = openCat(t, path)
	a, ok := c.Lookup("a")
	if !ok || a.Shard != 2 || a.Node == nil || *a.Node != 3 {
		t.Errorf("a after reopen: %+v %v (reassign must keep node)", a, ok)
	}
	if _, ok := c.Lookup("gone"); ok {
		t.Error("removed entry back")
	}
	if c.Len() != 2 || c.Entries()[0].Graph != "a" || c.Entries()[1].Graph != "b" {
		t.Errorf("entries %+v", c.Entries())
	}
}

func TestOpenRefusesCorruptRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), catalog.FileName)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bbolt.Tx) error {
		b, _ := tx.CreateBucketIfNotExists([]byte("tenant_catalog"))
		return b.Put([]byte("g"), []byte(`{"shard":"x"}`))
	})
	db.Close()
	if c, err := catalog.Open(path); err == nil {
		c.Close()
		t.Fatal("opened a catalog with an invalid row")
	}
	os.Remove(path)
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"agent:42", "héllo", "a.b-c_d", "日本語", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := catalog.Sanitize(s)
		if utf8.RuneCountInString(s) != len(out) {
			t.Fatalf("Sanitize(%q)=%q: one output byte per character", s, out)
		}
		if catalog.Sanitize(out) != out {
			t.Fatalf("not idempotent: %q", out)
		}
		for i := range len(out) {
			c := out[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				t.Fatalf("kept %q", c)
			}
		}
		if k := catalog.HashShard(s, 7); k < 0 || k >= 7 || k != catalog.HashShard(out, 7) {
			t.Fatalf("HashShard %d", k)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	f.Add([]byte(`{"shard":1,"node":null}`))
	f.Add([]byte(`{"shard":4294967295,"node":2}`))
	f.Add([]byte(`{"shard":-1}`))
	f.Add([]byte(`{"node":1}`))
	f.Add([]byte(`{"shard":1} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := catalog.DecodeAssignment(b)
		if err != nil {
			return
		}
		if _, err := catalog.DecodeAssignment([]byte(fmt.Sprintf(`{"shard":%d}`, a.Shard))); err != nil {
			t.Fatal(err)
		}
	})
}

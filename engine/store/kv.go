package store

import (
	"bytes"
	"context"
	"slices"
	"strings"
)

func checkNSKey(ns, key string) error {
	switch {
	case ns == "":
		return invalid("ns is empty")
	case len(ns) > MaxNamespaceBytes:
		return tooLarge("ns", len(ns), MaxNamespaceBytes)
	case strings.IndexByte(ns, 0) >= 0:
		return invalid("ns contains NUL")
	case len(key) > MaxKeyBytes:
		return tooLarge("key", len(key), MaxKeyBytes)
	case strings.IndexByte(key, 0) >= 0:
		return invalid("key contains NUL")
	}
	return nil
}

func checkValue(field string, v []byte) error {
	if len(v) > MaxValueBytes {
		return tooLarge(field, len(v), MaxValueBytes)
	}
	return nil
}

func (g *gtx) kvPut(ns, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := g.put(g.kv, kvKey(ns, key), value)
	return err
}

func (g *gtx) kvDelete(ns, key string) (bool, error) { return g.del(g.kv, kvKey(ns, key)) }

func (g *gtx) kvCAS(ns, key string, expected, new []byte) (bool, error) {
	k := kvKey(ns, key)
	cur := g.kv.Get(k)
	switch {
	case expected == nil && cur != nil:
		return false, nil
	case expected != nil && (cur == nil || !bytes.Equal(cur, expected)):
		return false, nil
	}
	if new == nil {
		_, err := g.del(g.kv, k)
		return true, err
	}
	_, err := g.put(g.kv, k, new)
	return true, err
}

// KVGet returns the value of (ns, key), or ErrNotFound.
func (s *Store) KVGet(ctx context.Context, graph, ns, key string) ([]byte, error) {
	if err := checkNSKey(ns, key); err != nil {
		return nil, err
	}
	var v []byte
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return ErrNotFound
		}
		cur := g.kv.Get(kvKey(ns, key))
		if cur == nil {
			return ErrNotFound
		}
		v = slices.Clone(cur)
		if v == nil {
			v = []byte{}
		}
		return nil
	})
	return v, err
}

// KVPut stores value under (ns, key).
func (s *Store) KVPut(ctx context.Context, graph, ns, key string, value []byte) error {
	if err := checkNSKey(ns, key); err != nil {
		return err
	}
	if err := checkValue("value", value); err != nil {
		return err
	}
	_, err := s.update(ctx, graph, func(g *gtx) (any, error) { return nil, g.kvPut(ns, key, value) })
	return err
}

// KVDelete removes (ns, key); deleted reports whether it existed.
func (s *Store) KVDelete(ctx context.Context, graph, ns, key string) (deleted bool, err error) {
	if err := checkNSKey(ns, key); err != nil {
		return false, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) { return g.kvDelete(ns, key) })
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

// KVScan returns the rows of namespace ns whose key has prefix, in key
// order, at most limit (0 means DefaultScanLimit, capped at MaxScanLimit)
// and at most MaxScanBytes of keys and values.
func (s *Store) KVScan(ctx context.Context, graph, ns, prefix string, limit int) ([]KVItem, error) {
	if err := checkNSKey(ns, prefix); err != nil {
		return nil, err
	}
	limit = listLimit(limit, DefaultScanLimit, MaxScanLimit)
	items := []KVItem{}
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return nil
		}
		p := kvKey(ns, prefix)
		nsLen := len(lp(ns))
		size := 0
		c := g.kv.Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && len(items) < limit; k, v = c.Next() {
			size += len(k) - nsLen + len(v)
			if size > MaxScanBytes {
				break
			}
			val := slices.Clone(v)
			if val == nil {
				val = []byte{}
			}
			items = append(items, KVItem{Key: string(k[nsLen:]), Value: val})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// KVCAS swaps (ns, key) from expected to new iff its current value equals
// expected. A nil expected means "absent" (create-if-absent); a nil new
// deletes the key. A failed swap writes nothing and is not an error.
func (s *Store) KVCAS(ctx context.Context, graph, ns, key string, expected, new []byte) (swapped bool, err error) {
	if err := checkNSKey(ns, key); err != nil {
		return false, err
	}
	if err := checkValue("expected", expected); err != nil {
		return false, err
	}
	if err := checkValue("new", new); err != nil {
		return false, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) { return g.kvCAS(ns, key, expected, new) })
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

package store

import (
	"go.etcd.io/bbolt"
)

// gtx is one graph's bucket inside a transaction, with the counter deltas
// of the current operation (flushed into meta by flush).
type gtx struct {
	b, meta, nodes, labels, out, in, kv *bbolt.Bucket
	dNodes, dEdges, dBytes              int64
}

var subBuckets = [][]byte{bMeta, bNodes, bLabels, bOut, bIn, bKV}

// openGraphW opens graph's bucket for writing, creating it (with metadata
// of type typ, "" meaning Global) when absent.
func openGraphW(tx *bbolt.Tx, graph, typ string) (*gtx, error) {
	b := tx.Bucket([]byte(graph))
	if b == nil {
		var err error
		if b, err = tx.CreateBucket([]byte(graph)); err != nil {
			return nil, err
		}
	}
	subs := make([]*bbolt.Bucket, len(subBuckets))
	for i, name := range subBuckets {
		sb, err := b.CreateBucketIfNotExists(name)
		if err != nil {
			return nil, err
		}
		subs[i] = sb
	}
	g := &gtx{b: b, meta: subs[0], nodes: subs[1], labels: subs[2], out: subs[3], in: subs[4], kv: subs[5]}
	if g.meta.Get(mType) == nil {
		if typ == "" {
			typ = GraphGlobal
		}
		if err := g.meta.Put(mName, []byte(graph)); err != nil {
			return nil, err
		}
		if err := g.meta.Put(mType, []byte(typ)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// openGraphR opens graph's bucket for reading; nil when absent.
func openGraphR(tx *bbolt.Tx, graph string) *gtx {
	b := tx.Bucket([]byte(graph))
	if b == nil {
		return nil
	}
	return &gtx{b: b, meta: b.Bucket(bMeta), nodes: b.Bucket(bNodes), labels: b.Bucket(bLabels),
		out: b.Bucket(bOut), in: b.Bucket(bIn), kv: b.Bucket(bKV)}
}

// flush adds the operation's counter deltas to meta.
func (g *gtx) flush() error {
	for _, c := range []struct {
		key []byte
		d   int64
	}{{mNodes, g.dNodes}, {mEdges, g.dEdges}, {mBytes, g.dBytes}} {
		if c.d == 0 {
			continue
		}
		v := int64(u64(g.meta.Get(c.key))) + c.d
		if err := g.meta.Put(c.key, putU64(uint64(max(v, 0)))); err != nil {
			return err
		}
	}
	g.dNodes, g.dEdges, g.dBytes = 0, 0, 0
	return nil
}

// put writes a counted row (nodes, out, kv), tracking its bytes.
func (g *gtx) put(b *bbolt.Bucket, k, v []byte) (existed bool, err error) {
	old := b.Get(k)
	if old != nil {
		g.dBytes -= int64(len(old))
	} else {
		g.dBytes += int64(len(k))
	}
	g.dBytes += int64(len(v))
	return old != nil, b.Put(k, v)
}

// del deletes a counted row, tracking its bytes.
func (g *gtx) del(b *bbolt.Bucket, k []byte) (existed bool, err error) {
	old := b.Get(k)
	if old == nil {
		return false, nil
	}
	g.dBytes -= int64(len(k) + len(old))
	return true, b.Delete(k)
}

func (g *gtx) stats() (nodes, edges, bytes uint64) {
	if g == nil || g.meta == nil {
		return 0, 0, 0
	}
	return u64(g.meta.Get(mNodes)), u64(g.meta.Get(mEdges)), u64(g.meta.Get(mBytes))
}

package store

import (
	"context"
	"fmt"
)

// batchStep is one validated batch op, ready to run on a graph.
type batchStep func(g *gtx) (Result, error)

// checkOp validates op i of a batch and returns its step. Fields that do not
// belong to the op are refused, so a misspelt batch cannot half-apply.
func checkOp(i int, o Op) (batchStep, error) {
	bad := func(format string, args ...any) error {
		return invalid("ops[%d] (%s): "+format, append([]any{i, o.Op}, args...)...)
	}
	nodeF := o.ID != "" || o.Labels != nil || o.Props != nil
	casF := o.If != nil || o.Set != nil
	edgeF := o.From != "" || o.Type != "" || o.To != ""
	kvF := o.NS != "" || o.Key != "" || o.Value != nil
	casKV := o.Expected != nil || o.New != nil
	only := func(fields ...bool) error {
		// fields are, in order: node, cas, edge, kv, kv-cas; true = allowed.
		have := []bool{nodeF, casF, edgeF, kvF, casKV}
		names := []string{"node fields", "if/set", "from/type/to", "ns/key/value", "expected/new"}
		for j, ok := range fields {
			if have[j] && !ok {
				return bad("%s do not belong to this op", names[j])
			}
		}
		return nil
	}
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("ops[%d] (%s): %w", i, o.Op, err)
	}
	switch o.Op {
	case OpNodePut, OpNodeCreate:
		if err := only(true, false, false, false, false); err != nil {
			return nil, err
		}
		in, err := checkNode(Node{ID: o.ID, Labels: o.Labels, Props: o.Props})
		if err != nil {
			return nil, wrap(err)
		}
		create := o.Op == OpNodeCreate
		name := o.Op
		return func(g *gtx) (Result, error) {
			c, v, err := g.nodePut(in, create)
			return Result{Op: name, Created: c, Version: v}, err
		}, nil
	case OpNodeDelete:
		if o.Labels != nil || o.Props != nil {
			return nil, bad("labels/props do not belong to this op")
		}
		if err := only(true, false, false, false, false); err != nil {
			return nil, err
		}
		if err := checkID("id", o.ID); err != nil {
			return nil, wrap(err)
		}
		return func(g *gtx) (Result, error) {
			d, err := g.nodeDelete(o.ID)
			return Result{Op: OpNodeDelete, Deleted: d}, err
		}, nil
	case OpNodeCAS:
		if o.Labels != nil || o.Props != nil {
			return nil, bad("labels/props do not belong to this op")
		}
		if err := only(true, true, false, false, false); err != nil {
			return nil, err
		}
		in, err := checkCAS(o.ID, o.If, o.Set)
		if err != nil {
			return nil, wrap(err)
		}
		return func(g *gtx) (Result, error) {
			sw, v, err := g.nodeCAS(in)
			return Result{Op: OpNodeCAS, Swapped: sw, Version: v}, err
		}, nil
	case OpEdgePut, OpEdgeDelete:
		if o.ID != "" || o.Labels != nil || (o.Op == OpEdgeDelete && o.Props != nil) {
			return nil, bad("id/labels do not belong to this op")
		}
		if err := only(true, false, true, false, false); err != nil {
			return nil, err
		}
		if err := checkEdgeKey(o.From, o.Type, o.To); err != nil {
			return nil, wrap(err)
		}
		if o.Op == OpEdgeDelete {
			return func(g *gtx) (Result, error) {
				d, err := g.edgeDelete(o.From, o.Type, o.To)
				return Result{Op: OpEdgeDelete, Deleted: d}, err
			}, nil
		}
		props, err := compactObject("props", o.Props)
		if err != nil {
			return nil, wrap(err)
		}
		return func(g *gtx) (Result, error) {
			return Result{Op: OpEdgePut}, g.edgePut(o.From, o.Type, o.To, props)
		}, nil
	case OpKVPut, OpKVDelete, OpKVCAS:
		if err := only(false, false, false, true, o.Op == OpKVCAS); err != nil {
			return nil, err
		}
		if o.Op != OpKVPut && o.Value != nil {
			return nil, bad("value does not belong to this op")
		}
		if err := checkNSKey(o.NS, o.Key); err != nil {
			return nil, wrap(err)
		}
		for _, v := range []struct {
			f string
			b []byte
		}{{"value", o.Value}, {"expected", o.Expected}, {"new", o.New}} {
			if err := checkValue(v.f, v.b); err != nil {
				return nil, wrap(err)
			}
		}
		switch o.Op {
		case OpKVPut:
			return func(g *gtx) (Result, error) { return Result{Op: OpKVPut}, g.kvPut(o.NS, o.Key, o.Value) }, nil
		case OpKVDelete:
			return func(g *gtx) (Result, error) {
				d, err := g.kvDelete(o.NS, o.Key)
				return Result{Op: OpKVDelete, Deleted: d}, err
			}, nil
		}
		return func(g *gtx) (Result, error) {
			sw, err := g.kvCAS(o.NS, o.Key, o.Expected, o.New)
			return Result{Op: OpKVCAS, Swapped: sw}, err
		}, nil
	case "":
		return nil, invalid("ops[%d]: missing op", i)
	}
	return nil, invalid("ops[%d]: unknown op %q", i, o.Op)
}

// Batch applies ops atomically in one transaction and returns one Result
// per op. Every op is validated first: an unknown or invalid op (or more
// than MaxBatchOps) rejects the whole batch with ErrInvalid / *LimitError
// and changes nothing; so does an op that fails while running (e.g. a
// node_cas whose merged props exceed the limit). Accepted ops: node_put,
// node_create, node_delete, node_cas, edge_put, edge_delete, kv_put,
// kv_delete, kv_cas.
func (s *Store) Batch(ctx context.Context, graph string, ops []Op) ([]Result, error) {
	if len(ops) > MaxBatchOps {
		return nil, tooLarge("ops", len(ops), MaxBatchOps)
	}
	steps := make([]batchStep, len(ops))
	for i, o := range ops {
		st, err := checkOp(i, o)
		if err != nil {
			return nil, err
		}
		steps[i] = st
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) {
		res := make([]Result, len(steps))
		for i, st := range steps {
			var err error
			if res[i], err = st(g); err != nil {
				return nil, fmt.Errorf("ops[%d] (%s): %w", i, ops[i].Op, err)
			}
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return r.([]Result), nil
}

package store

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
)

func checkID(field, id string) error {
	switch {
	case id == "":
		return invalid("%s is empty", field)
	case len(id) > MaxIDBytes:
		return tooLarge(field, len(id), MaxIDBytes)
	}
	return nil
}

func checkLabel(l string) error {
	switch {
	case l == "":
		return invalid("empty label")
	case len(l) > MaxLabelBytes:
		return tooLarge("labels", len(l), MaxLabelBytes)
	}
	return nil
}

// nodeInput is a validated node_put / node_create argument.
type nodeInput struct {
	id     string
	labels []string
	props  []byte
}

func checkNode(n Node) (nodeInput, error) {
	if err := checkID("id", n.ID); err != nil {
		return nodeInput{}, err
	}
	if len(n.Labels) > MaxLabels {
		return nodeInput{}, tooLarge("labels", len(n.Labels), MaxLabels)
	}
	for _, l := range n.Labels {
		if err := checkLabel(l); err != nil {
			return nodeInput{}, err
		}
	}
	props, err := compactObject("props", n.Props)
	if err != nil {
		return nodeInput{}, err
	}
	return nodeInput{id: n.ID, labels: normLabels(n.Labels), props: props}, nil
}

// casInput is a validated node_cas argument.
type casInput struct {
	id   string
	cond map[string]any
	set  map[string]json.RawMessage
}

func checkCAS(id string, cond, set map[string]json.RawMessage) (casInput, error) {
	if err := checkID("id", id); err != nil {
		return casInput{}, err
	}
	in := casInput{id: id, cond: make(map[string]any, len(cond)), set: make(map[string]json.RawMessage, len(set))}
	size := 0
	for k, v := range cond {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return casInput{}, invalid("if.%s is not valid JSON: %v", k, err)
		}
		in.cond[k] = x
		size += len(k) + len(v)
	}
	for k, v := range set {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return casInput{}, invalid("set.%s is not valid JSON: %v", k, err)
		}
		in.set[k] = buf.Bytes()
		size += len(k) + buf.Len()
	}
	if size > MaxPropsBytes {
		return casInput{}, tooLarge("set", size, MaxPropsBytes)
	}
	return in, nil
}

func (g *gtx) nodePut(n nodeInput, createOnly bool) (created bool, version uint64, err error) {
	key := []byte(n.id)
	old := g.nodes.Get(key)
	var oldLabels []string
	if old != nil {
		on, err := decodeNode(n.id, old)
		if err != nil {
			return false, 0, err
		}
		if createOnly {
			return false, on.Version, nil
		}
		version, oldLabels = on.Version+1, on.Labels
	} else {
		version = 1
		g.dNodes++
	}
	for _, l := range oldLabels {
		if _, keep := slices.BinarySearch(n.labels, l); !keep {
			if err := g.labels.Delete(append(lp(l), n.id...)); err != nil {
				return false, 0, err
			}
		}
	}
	for _, l := range n.labels {
		if err := g.labels.Put(append(lp(l), n.id...), nil); err != nil {
			return false, 0, err
		}
	}
	if _, err := g.put(g.nodes, key, encodeNode(version, n.labels, n.props)); err != nil {
		return false, 0, err
	}
	return old == nil, version, nil
}

func (g *gtx) nodeDelete(id string) (bool, error) {
	key := []byte(id)
	old := g.nodes.Get(key)
	if old != nil {
		on, err := decodeNode(id, old)
		if err != nil {
			return false, err
		}
		for _, l := range on.Labels {
			if err := g.labels.Delete(append(lp(l), id...)); err != nil {
				return false, err
			}
		}
		if _, err := g.del(g.nodes, key); err != nil {
			return false, err
		}
		g.dNodes--
	}
	// Its edges, both directions, found through the two indexes.
	var outs, ins [][3]string
	prefix := lp(id)
	c := g.out.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		f, t, to, err := decodeEdgeKey(k)
		if err != nil {
			return false, err
		}
		outs = append(outs, [3]string{f, t, to})
	}
	c = g.in.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		to, t, f, err := decodeEdgeKey(k)
		if err != nil {
			return false, err
		}
		ins = append(ins, [3]string{f, t, to})
	}
	for _, e := range append(outs, ins...) {
		if _, err := g.edgeDelete(e[0], e[1], e[2]); err != nil {
			return false, err
		}
	}
	return old != nil, nil
}

func (g *gtx) nodeCAS(in casInput) (swapped bool, version uint64, err error) {
	old := g.nodes.Get([]byte(in.id))
	if old == nil {
		return false, 0, nil
	}
	n, err := decodeNode(in.id, old)
	if err != nil {
		return false, 0, err
	}
	props := map[string]json.RawMessage{}
	if err := json.Unmarshal(n.Props, &props); err != nil {
		return false, 0, errCorrupt
	}
	for k, want := range in.cond {
		var cur any
		if raw, ok := props[k]; ok {
			if err := json.Unmarshal(raw, &cur); err != nil {
				return false, 0, errCorrupt
			}
		}
		if !reflect.DeepEqual(cur, want) {
			return false, n.Version, nil
		}
	}
	for k, v := range in.set {
		props[k] = v
	}
	b, err := json.Marshal(props)
	if err != nil {
		return false, 0, err
	}
	if len(b) > MaxPropsBytes {
		return false, 0, tooLarge("props", len(b), MaxPropsBytes)
	}
	version = n.Version + 1
	if _, err := g.put(g.nodes, []byte(in.id), encodeNode(version, n.Labels, b)); err != nil {
		return false, 0, err
	}
	return true, version, nil
}

// NodePut upserts n (n.Version is ignored): its labels and props replace the
// stored ones. It returns the new version.
func (s *Store) NodePut(ctx context.Context, graph string, n Node) (version uint64, err error) {
	in, err := checkNode(n)
	if err != nil {
		return 0, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) {
		_, v, err := g.nodePut(in, false)
		return v, err
	})
	if err != nil {
		return 0, err
	}
	return r.(uint64), nil
}

// NodeCreate inserts n if no node has its id. created is true only for the
// inserter; version is the node's version either way.
func (s *Store) NodeCreate(ctx context.Context, graph string, n Node) (created bool, version uint64, err error) {
	in, err := checkNode(n)
	if err != nil {
		return false, 0, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) {
		c, v, err := g.nodePut(in, true)
		return Result{Op: OpNodeCreate, Created: c, Version: v}, err
	})
	if err != nil {
		return false, 0, err
	}
	res := r.(Result)
	return res.Created, res.Version, nil
}

// NodeGet returns the node, or ErrNotFound.
func (s *Store) NodeGet(ctx context.Context, graph, id string) (Node, error) {
	if err := checkID("id", id); err != nil {
		return Node{}, err
	}
	var n Node
	err := s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return ErrNotFound
		}
		v := g.nodes.Get([]byte(id))
		if v == nil {
			return ErrNotFound
		}
		var err error
		n, err = decodeNode(id, v)
		return err
	})
	return n, err
}

// NodeDelete removes the node and its edges in both directions. deleted
// reports whether the node existed.
func (s *Store) NodeDelete(ctx context.Context, graph, id string) (deleted bool, err error) {
	if err := checkID("id", id); err != nil {
		return false, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) { return g.nodeDelete(id) })
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

// NodeCAS merges set into the node's props iff the node exists and every
// condition in cond equals the current value of its field (a missing field
// reads as null; values compare as decoded JSON). Otherwise swapped is false
// and nothing is written (not an error). version is the node's version
// afterwards (0 for an absent node). An undecodable condition or set value
// is ErrInvalid; merged props over MaxPropsBytes a *LimitError.
func (s *Store) NodeCAS(ctx context.Context, graph, id string, cond, set map[string]json.RawMessage) (swapped bool, version uint64, err error) {
	in, err := checkCAS(id, cond, set)
	if err != nil {
		return false, 0, err
	}
	r, err := s.update(ctx, graph, func(g *gtx) (any, error) {
		sw, v, err := g.nodeCAS(in)
		return Result{Op: OpNodeCAS, Swapped: sw, Version: v}, err
	})
	if err != nil {
		return false, 0, err
	}
	res := r.(Result)
	return res.Swapped, res.Version, nil
}

func listLimit(limit, def, maxLimit int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, maxLimit)
}

// NodesByLabel lists nodes whose labels contain label ("" means every node)
// in id order, starting after the exclusive cursor after; limit 0 means
// DefaultListLimit, capped at MaxListLimit. next is the cursor of the next
// page, "" at the end.
func (s *Store) NodesByLabel(ctx context.Context, graph, label, after string, limit int) (nodes []Node, next string, err error) {
	if len(label) > MaxLabelBytes {
		return nil, "", tooLarge("label", len(label), MaxLabelBytes)
	}
	if len(after) > MaxIDBytes {
		return nil, "", tooLarge("after", len(after), MaxIDBytes)
	}
	limit = listLimit(limit, DefaultListLimit, MaxListLimit)
	nodes = []Node{}
	err = s.view(ctx, graph, func(g *gtx) error {
		if g == nil {
			return nil
		}
		more := false
		if label == "" {
			c := g.nodes.Cursor()
			k, v := c.Seek([]byte(after))
			if k != nil && after != "" && string(k) == after {
				k, v = c.Next()
			}
			for ; k != nil; k, v = c.Next() {
				if len(nodes) == limit {
					more = true
					break
				}
				n, err := decodeNode(string(k), v)
				if err != nil {
					return err
				}
				nodes = append(nodes, n)
			}
		} else {
			prefix := lp(label)
			c := g.labels.Cursor()
			start := append(lp(label), after...)
			k, _ := c.Seek(start)
			if k != nil && after != "" && bytes.Equal(k, start) {
				k, _ = c.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if len(nodes) == limit {
					more = true
					break
				}
				id := string(k[len(prefix):])
				v := g.nodes.Get([]byte(id))
				if v == nil {
					continue
				}
				n, err := decodeNode(id, v)
				if err != nil {
					return err
				}
				nodes = append(nodes, n)
			}
		}
		if more && len(nodes) > 0 {
			next = nodes[len(nodes)-1].ID
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return nodes, next, nil
}

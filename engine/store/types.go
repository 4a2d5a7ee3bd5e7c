package store

import (
	"encoding/json"
	"fmt"
)

// Node is a stored node. Its JSON form is the node_get reply:
// {"id","labels","props","version"}.
type Node struct {
	// ID is 1..512 bytes.
	ID string `json:"id"`
	// Labels is a set: stored sorted and without duplicates.
	Labels []string `json:"labels"`
	// Props is a JSON object (≤ 1 MiB); nil or empty means {}.
	Props json.RawMessage `json:"props"`
	// Version increments on every change of the node; it is ignored on
	// input.
	Version uint64 `json:"version"`
}

// Edge is a stored edge, one per (From, Type, To). Its JSON form is the
// edge_get reply: {"from","type","to","props"}.
type Edge struct {
	From string `json:"from"`
	Type string `json:"type"`
	To   string `json:"to"`
	// Props is a JSON object (≤ 1 MiB); nil or empty means {}.
	Props json.RawMessage `json:"props"`
}

// Direction selects which edges Neighbors returns.
type Direction int

// Directions, with wire names "out", "in" and "both".
const (
	Out Direction = iota
	In
	Both
)

// ParseDirection parses the wire name of a direction; "" is Out.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "", "out":
		return Out, nil
	case "in":
		return In, nil
	case "both":
		return Both, nil
	}
	return 0, invalid("dir %q is not out, in or both", s)
}

// String returns the wire name of d.
func (d Direction) String() string {
	switch d {
	case Out:
		return "out"
	case In:
		return "in"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Batch operation names accepted in Op.Op.
const (
	OpNodePut    = "node_put"
	OpNodeCreate = "node_create"
	OpNodeDelete = "node_delete"
	OpNodeCAS    = "node_cas"
	OpEdgePut    = "edge_put"
	OpEdgeDelete = "edge_delete"
	OpKVPut      = "kv_put"
	OpKVDelete   = "kv_delete"
	OpKVCAS      = "kv_cas"
)

// Op is one operation of a batch. Its JSON shape is exactly the wire batch
// op: {"op":"node_put", ...the fields of that op's request}, so the service
// can decode the request's "ops" array straight into []Op. Fields that do
// not belong to the op must be absent (else ErrInvalid).
type Op struct {
	Op string `json:"op"`

	// Node ops: node_put, node_create ({id, labels, props}), node_delete
	// ({id}), node_cas ({id, if, set}).
	ID     string                     `json:"id,omitempty"`
	Labels []string                   `json:"labels,omitempty"`
	Props  json.RawMessage            `json:"props,omitempty"`
	If     map[string]json.RawMessage `json:"if,omitempty"`
	Set    map[string]json.RawMessage `json:"set,omitempty"`

	// Edge ops: edge_put ({from, type, to, props}), edge_delete
	// ({from, type, to}).
	From string `json:"from,omitempty"`
	Type string `json:"type,omitempty"`
	To   string `json:"to,omitempty"`

	// KV ops: kv_put ({ns, key, value}), kv_delete ({ns, key}), kv_cas
	// ({ns, key, expected?, new?}; nil means absent). Values are base64 in
	// JSON.
	NS       string `json:"ns,omitempty"`
	Key      string `json:"key,omitempty"`
	Value    []byte `json:"value,omitempty"`
	Expected []byte `json:"expected,omitempty"`
	New      []byte `json:"new,omitempty"`
}

// Result is the outcome of one batch operation. It marshals as that op's
// single-op reply: node_put {"version"}, node_create {"created","version"},
// node_delete / edge_delete / kv_delete {"deleted"}, node_cas
// {"swapped","version"}, kv_cas {"swapped"}, edge_put / kv_put {}.
type Result struct {
	// Op is the operation name; it selects the JSON shape.
	Op      string
	Version uint64
	Created bool
	Deleted bool
	Swapped bool
}

// MarshalJSON encodes r as its op's reply object.
func (r Result) MarshalJSON() ([]byte, error) {
	switch r.Op {
	case OpNodePut:
		return json.Marshal(struct {
			Version uint64 `json:"version"`
		}{r.Version})
	case OpNodeCreate:
		return json.Marshal(struct {
			Created bool   `json:"created"`
			Version uint64 `json:"version"`
		}{r.Created, r.Version})
	case OpNodeDelete, OpEdgeDelete, OpKVDelete:
		return json.Marshal(struct {
			Deleted bool `json:"deleted"`
		}{r.Deleted})
	case OpNodeCAS:
		return json.Marshal(struct {
			Swapped bool   `json:"swapped"`
			Version uint64 `json:"version"`
		}{r.Swapped, r.Version})
	case OpKVCAS:
		return json.Marshal(struct {
			Swapped bool `json:"swapped"`
		}{r.Swapped})
	}
	return []byte("{}"), nil
}

// KVItem is one row of a KV scan: {"key","value"} with the value base64 in
// JSON.
type KVItem struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// GraphStats is the stats reply of one graph: {"nodes","edges","bytes","shard"}.
// Bytes counts the keys and values of its node, edge and KV rows.
type GraphStats struct {
	Nodes uint64 `json:"nodes"`
	Edges uint64 `json:"edges"`
	Bytes uint64 `json:"bytes"`
	Shard int    `json:"shard"`
}

// Layout is the layout reply: {"shards":K,"files":[..],"catalog":bool}.
// Files are the shard file names (graph-<n>.db) in shard order.
type Layout struct {
	Shards  int      `json:"shards"`
	Files   []string `json:"files"`
	Catalog bool     `json:"catalog"`
}

// Graph types accepted by GraphCreate ("" means GraphGlobal).
const (
	GraphAgent  = "Agent"
	GraphTeam   = "Team"
	GraphGlobal = "Global"
	GraphBus    = "Bus"
)

// CatalogEntry is the catalog_get reply: {"graph","shard","node"}; Node is
// null when the graph lives on this node.
type CatalogEntry struct {
	Graph string  `json:"graph"`
	Shard int     `json:"shard"`
	Node  *uint32 `json:"node"`
}

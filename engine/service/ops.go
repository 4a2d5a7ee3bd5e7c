package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/rebalance"
	"github.com/edictrt/edict/engine/store"
)

// GraphOps lists the graph operations, each served on edict.eg.*.<op>.
var GraphOps = []string{
	"node_put", "node_create", "node_get", "node_delete", "node_cas", "nodes_by_label",
	"edge_put", "edge_get", "edge_delete", "neighbors", "traverse", "batch",
	"kv_get", "kv_put", "kv_delete", "kv_scan", "kv_cas",
	"graph_create", "graph_delete", "stats",
}

// WorkOps lists the work operations, each served on edict.work.<op>.
var WorkOps = []string{"submit", "claim", "ack", "retry", "defer", "extend", "dead", "dead_list", "dead_replay", "stats"}

// AdminOps lists the admin operations, each served on edict.admin.<op>.
var AdminOps = []string{"graph_list", "reshard", "catalog_get", "catalog_assign", "rebalance_plan", "rebalance_execute", "layout"}

// buildEndpoints returns one endpoint per op of the three families.
func (s *Service) buildEndpoints() []*endpoint {
	var eps []*endpoint
	for _, op := range GraphOps {
		eps = append(eps, &endpoint{
			name: "eg_" + op, subject: protocol.GraphPrefix + "*." + op, op: op, family: graphFamily,
			write: admission.RequiresWrite(op), decode: s.graphDecoder(op),
		})
	}
	work := slices.Clone(WorkOps)
	if s.cfg.Work != nil {
		for _, op := range s.cfg.Work.Ops() {
			if !slices.Contains(work, op) && protocol.ValidName(op) {
				work = append(work, op)
			}
		}
	}
	for _, op := range work {
		eps = append(eps, &endpoint{
			name: "work_" + op, subject: protocol.WorkPrefix + op, op: op, family: workFamily,
			write: admission.RequiresWrite(op), decode: s.workDecoder(op),
		})
	}
	for _, op := range AdminOps {
		eps = append(eps, &endpoint{
			name: "admin_" + op, subject: protocol.AdminPrefix + op, op: op, family: adminFamily,
			write: admission.RequiresWrite(op), decode: s.adminDecoder(op),
		})
	}
	for _, ep := range eps {
		ep.opSet = opSet(ep.op)
	}
	return eps
}

// workDecoder forwards the raw body to Config.Work, which decodes it.
func (s *Service) workDecoder(op string) func(string, []byte) (job, error) {
	return func(_ string, body []byte) (job, error) {
		if s.cfg.Work == nil {
			return func(context.Context, protocol.Caller) (any, error) {
				return nil, &protocol.Error{Code: protocol.CodeInternal, Text: "INTERNAL: work items are not configured on this engine"}
			}, nil
		}
		if t := strings.TrimSpace(string(body)); t != "" && !json.Valid(body) {
			return nil, protocol.BadRequest("malformed request: body is not JSON")
		}
		return func(ctx context.Context, c protocol.Caller) (any, error) {
			return s.cfg.Work.Handle(ctx, protocol.Request{Op: op, Caller: c, Body: body})
		}, nil
	}
}

// storeErr maps a store error to the wire error.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	text := strings.TrimPrefix(err.Error(), "store: ")
	switch store.Code(err) {
	case 400:
		return protocol.BadRequest("%s", text)
	case 404:
		return protocol.NotFound("NOT_FOUND: %s", text)
	case 413:
		return protocol.TooLarge("%s", text)
	case 503:
		return protocol.Busy("engine shutting down")
	}
	return &protocol.Error{Code: protocol.CodeInternal, Text: "INTERNAL: " + text}
}

// decodeInto returns a decoder that strictly decodes the body into a fresh
// T, validates it and builds the job.
func decodeInto[T any](build func(graph string, req *T) (job, error)) func(string, []byte) (job, error) {
	return func(graph string, body []byte) (job, error) {
		req := new(T)
		if err := protocol.Decode(body, req); err != nil {
			return nil, err
		}
		return build(graph, req)
	}
}

type nodeReq struct {
	ID     string          `json:"id"`
	Labels []string        `json:"labels"`
	Props  json.RawMessage `json:"props"`
}

type idReq struct {
	ID string `json:"id"`
}

type casReq struct {
	ID  string                     `json:"id"`
	If  map[string]json.RawMessage `json:"if"`
	Set map[string]json.RawMessage `json:"set"`
}

type labelReq struct {
	Label string `json:"label"`
	After string `json:"after"`
	Limit int    `json:"limit"`
}

type edgeReq struct {
	From  string          `json:"from"`
	Type  string          `json:"type"`
	To    string          `json:"to"`
	Props json.RawMessage `json:"props"`
}

type edgeKeyReq struct {
	From string `json:"from"`
	Type string `json:"type"`
	To   string `json:"to"`
}

type neighborsReq struct {
	ID    string `json:"id"`
	Dir   string `json:"dir"`
	Type  string `json:"type"`
	Limit int    `json:"limit"`
}

type traverseReq struct {
	From  string   `json:"from"`
	Depth int      `json:"depth"`
	Types []string `json:"types"`
	Limit int      `json:"limit"`
}

type batchReq struct {
	Ops []store.Op `json:"ops"`
}

type kvKeyReq struct {
	NS  string `json:"ns"`
	Key string `json:"key"`
}

type kvPutReq struct {
	NS    string `json:"ns"`
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type kvScanReq struct {
	NS     string `json:"ns"`
	Prefix string `json:"prefix"`
	Limit  int    `json:"limit"`
}

type kvCASReq struct {
	NS       string          `json:"ns"`
	Key      string          `json:"key"`
	Expected json.RawMessage `json:"expected"`
	New      json.RawMessage `json:"new"`
}

type graphCreateReq struct {
	Type string `json:"type"`
}

type emptyReq struct{}

// nodeOut is a node as replied: labels never null, props never null.
func nodeOut(n store.Node) store.Node {
	if n.Labels == nil {
		n.Labels = []string{}
	}
	if len(n.Props) == 0 {
		n.Props = json.RawMessage("{}")
	}
	return n
}

func edgeOut(e store.Edge) store.Edge {
	if len(e.Props) == 0 {
		e.Props = json.RawMessage("{}")
	}
	return e
}

func (s *Service) noStore() (job, error) {
	return func(context.Context, protocol.Caller) (any, error) {
		return nil, &protocol.Error{Code: protocol.CodeInternal, Text: "INTERNAL: graph store not configured"}
	}, nil
}

// access runs the access check of a graph op inside its job.
func (s *Service) access(c protocol.Caller, graph string, write bool) error {
	if s.cfg.Access == nil {
		return nil
	}
	need := Read
	if write {
		need = Write
	}
	if s.cfg.Access.level(c.Principal, graph) >= need {
		return nil
	}
	s.metrics.accessDenied.Add(context.Background(), 1)
	return &protocol.Error{Code: protocol.CodeForbidden, Text: fmt.Sprintf("ACCESS_DENIED: agent '%s' lacks %s access to graph '%s'", c.Principal, need, graph)}
}

// graphDecoder returns the decoder of graph op op.
func (s *Service) graphDecoder(op string) func(string, []byte) (job, error) {
	st := s.cfg.Store
	write := admission.RequiresWrite(op)
	// wrap adds the store check and the access check to a job.
	wrap := func(graph string, fn func(ctx context.Context, c protocol.Caller) (any, error)) (job, error) {
		if st == nil {
			return s.noStore()
		}
		return func(ctx context.Context, c protocol.Caller) (any, error) {
			if err := s.access(c, graph, write); err != nil {
				return nil, err
			}
			v, err := fn(ctx, c)
			return v, storeErr(err)
		}, nil
	}
	switch op {
	case "node_put", "node_create":
		return decodeInto(func(g string, r *nodeReq) (job, error) {
			if r.ID == "" {
				return nil, protocol.BadRequest("id is required")
			}
			n := store.Node{ID: r.ID, Labels: r.Labels, Props: r.Props}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				if op == "node_put" {
					v, err := st.NodePut(ctx, g, n)
					return map[string]uint64{"version": v}, err
				}
				created, v, err := st.NodeCreate(ctx, g, n)
				return struct {
					Created bool   `json:"created"`
					Version uint64 `json:"version"`
				}{created, v}, err
			})
		})
	case "node_get", "node_delete":
		return decodeInto(func(g string, r *idReq) (job, error) {
			if r.ID == "" {
				return nil, protocol.BadRequest("id is required")
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				if op == "node_get" {
					n, err := st.NodeGet(ctx, g, r.ID)
					if errors.Is(err, store.ErrNotFound) {
						return nil, protocol.NotFound("NOT_FOUND: node %q not found in graph %q", truncate(r.ID), g)
					}
					return nodeOut(n), err
				}
				d, err := st.NodeDelete(ctx, g, r.ID)
				return map[string]bool{"deleted": d}, err
			})
		})
	case "node_cas":
		return decodeInto(func(g string, r *casReq) (job, error) {
			if r.ID == "" {
				return nil, protocol.BadRequest("id is required")
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				sw, v, err := st.NodeCAS(ctx, g, r.ID, r.If, r.Set)
				return struct {
					Swapped bool   `json:"swapped"`
					Version uint64 `json:"version"`
				}{sw, v}, err
			})
		})
	case "nodes_by_label":
		return decodeInto(func(g string, r *labelReq) (job, error) {
			if r.Limit < 0 {
				return nil, protocol.BadRequest("limit must not be negative")
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				nodes, next, err := st.NodesByLabel(ctx, g, r.Label, r.After, r.Limit)
				out := make([]store.Node, len(nodes))
				for i, n := range nodes {
					out[i] = nodeOut(n)
				}
				return struct {
					Nodes []store.Node `json:"nodes"`
					Next  string       `json:"next"`
				}{out, next}, err
			})
		})
	case "edge_put":
		return decodeInto(func(g string, r *edgeReq) (job, error) {
			if err := edgeKey(r.From, r.Type, r.To); err != nil {
				return nil, err
			}
			e := store.Edge{From: r.From, Type: r.Type, To: r.To, Props: r.Props}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				return struct{}{}, st.EdgePut(ctx, g, e)
			})
		})
	case "edge_get", "edge_delete":
		return decodeInto(func(g string, r *edgeKeyReq) (job, error) {
			if err := edgeKey(r.From, r.Type, r.To); err != nil {
				return nil, err
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				if op == "edge_get" {
					e, err := st.EdgeGet(ctx, g, r.From, r.Type, r.To)
					if errors.Is(err, store.ErrNotFound) {
						return nil, protocol.NotFound("NOT_FOUND: edge (%q, %q, %q) not found in graph %q", truncate(r.From), truncate(r.Type), truncate(r.To), g)
					}
					return edgeOut(e), err
				}
				d, err := st.EdgeDelete(ctx, g, r.From, r.Type, r.To)
				return map[string]bool{"deleted": d}, err
			})
		})
	case "neighbors":
		return decodeInto(func(g string, r *neighborsReq) (job, error) {
			if r.ID == "" {
				return nil, protocol.BadRequest("id is required")
			}
			dir, err := store.ParseDirection(r.Dir)
			if err != nil {
				return nil, protocol.BadRequest("%s", strings.TrimPrefix(err.Error(), "store: "))
			}
			if r.Limit < 0 {
				return nil, protocol.BadRequest("limit must not be negative")
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				es, err := st.Neighbors(ctx, g, r.ID, dir, r.Type, r.Limit)
				out := make([]store.Edge, len(es))
				for i, e := range es {
					out[i] = edgeOut(e)
				}
				return map[string][]store.Edge{"edges": out}, err
			})
		})
	case "traverse":
		return decodeInto(func(g string, r *traverseReq) (job, error) {
			if r.From == "" {
				return nil, protocol.BadRequest("from is required")
			}
			if r.Depth < 0 || r.Limit < 0 {
				return nil, protocol.BadRequest("depth and limit must not be negative")
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				ids, err := st.Traverse(ctx, g, r.From, r.Depth, r.Types, r.Limit)
				if ids == nil {
					ids = []string{}
				}
				return map[string][]string{"nodes": ids}, err
			})
		})
	case "batch":
		return decodeInto(func(g string, r *batchReq) (job, error) {
			if len(r.Ops) > store.MaxBatchOps {
				return nil, protocol.TooLarge("ops too large: %d > %d", len(r.Ops), store.MaxBatchOps)
			}
			for i, o := range r.Ops {
				switch o.Op {
				case store.OpKVPut, store.OpKVDelete, store.OpKVCAS:
					if err := checkNS(o.NS); err != nil {
						return nil, err
					}
				case store.OpNodePut, store.OpNodeCreate, store.OpNodeDelete, store.OpNodeCAS, store.OpEdgePut, store.OpEdgeDelete:
				default:
					return nil, protocol.BadRequest("ops[%d]: unknown batch op %q", i, truncate(o.Op))
				}
			}
			return wrap(g, func(ctx context.Context, c protocol.Caller) (any, error) {
				ops := slices.Clone(r.Ops)
				for i := range ops {
					if ops[i].NS != "" {
						ops[i].NS = scopedNS(c.Principal, ops[i].NS)
					}
				}
				res, err := st.Batch(ctx, g, ops)
				if res == nil {
					res = []store.Result{}
				}
				return map[string][]store.Result{"results": res}, err
			})
		})
	case "kv_get", "kv_delete":
		return decodeInto(func(g string, r *kvKeyReq) (job, error) {
			if err := checkNS(r.NS); err != nil {
				return nil, err
			}
			return wrap(g, func(ctx context.Context, c protocol.Caller) (any, error) {
				ns := scopedNS(c.Principal, r.NS)
				if op == "kv_get" {
					v, err := st.KVGet(ctx, g, ns, r.Key)
					if errors.Is(err, store.ErrNotFound) {
						return nil, protocol.NotFound("NOT_FOUND: key %q not found in namespace %q", truncate(r.Key), truncate(r.NS))
					}
					return map[string][]byte{"value": v}, err
				}
				d, err := st.KVDelete(ctx, g, ns, r.Key)
				return map[string]bool{"deleted": d}, err
			})
		})
	case "kv_put":
		return decodeInto(func(g string, r *kvPutReq) (job, error) {
			if err := checkNS(r.NS); err != nil {
				return nil, err
			}
			if r.Value == nil {
				r.Value = []byte{}
			}
			return wrap(g, func(ctx context.Context, c protocol.Caller) (any, error) {
				return struct{}{}, st.KVPut(ctx, g, scopedNS(c.Principal, r.NS), r.Key, r.Value)
			})
		})
	case "kv_scan":
		return decodeInto(func(g string, r *kvScanReq) (job, error) {
			if err := checkNS(r.NS); err != nil {
				return nil, err
			}
			if r.Limit < 0 {
				return nil, protocol.BadRequest("limit must not be negative")
			}
			return wrap(g, func(ctx context.Context, c protocol.Caller) (any, error) {
				items, err := st.KVScan(ctx, g, scopedNS(c.Principal, r.NS), r.Prefix, r.Limit)
				if items == nil {
					items = []store.KVItem{}
				}
				return map[string][]store.KVItem{"items": items}, err
			})
		})
	case "kv_cas":
		return decodeInto(func(g string, r *kvCASReq) (job, error) {
			if err := checkNS(r.NS); err != nil {
				return nil, err
			}
			expected, err := optionalBytes("expected", r.Expected)
			if err != nil {
				return nil, err
			}
			next, err := optionalBytes("new", r.New)
			if err != nil {
				return nil, err
			}
			return wrap(g, func(ctx context.Context, c protocol.Caller) (any, error) {
				sw, err := st.KVCAS(ctx, g, scopedNS(c.Principal, r.NS), r.Key, expected, next)
				return map[string]bool{"swapped": sw}, err
			})
		})
	case "graph_create":
		return decodeInto(func(g string, r *graphCreateReq) (job, error) {
			switch r.Type {
			case "", store.GraphAgent, store.GraphTeam, store.GraphGlobal, store.GraphBus:
			default:
				return nil, protocol.BadRequest("type %q is not Agent, Team, Global or Bus", truncate(r.Type))
			}
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				created, err := st.GraphCreate(ctx, g, r.Type)
				return map[string]bool{"created": created}, err
			})
		})
	case "graph_delete":
		return decodeInto(func(g string, _ *emptyReq) (job, error) {
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				d, err := st.GraphDelete(ctx, g)
				return map[string]bool{"deleted": d}, err
			})
		})
	case "stats":
		return decodeInto(func(g string, _ *emptyReq) (job, error) {
			return wrap(g, func(ctx context.Context, _ protocol.Caller) (any, error) {
				return st.Stats(ctx, g)
			})
		})
	}
	panic("service: no decoder for graph op " + op)
}

func edgeKey(from, typ, to string) error {
	if from == "" || typ == "" || to == "" {
		return protocol.BadRequest("from, type and to are required")
	}
	return nil
}

// checkNS validates a KV namespace as the client sent it: 1..256 bytes, no
// NUL.
func checkNS(ns string) error {
	switch {
	case ns == "":
		return protocol.BadRequest("ns is required")
	case len(ns) > store.MaxNamespaceBytes:
		return protocol.TooLarge("ns too large: %d > %d", len(ns), store.MaxNamespaceBytes)
	case strings.ContainsRune(ns, 0):
		return protocol.BadRequest("ns must not contain NUL")
	}
	return nil
}

// scopedNS is the stored namespace of ns for principal: an opaque hash of
// the caller's tenant (account) and actor (user) with the requested one, so
// callers never see each other's keys. The anonymous principal is tenant
// and actor "anonymous"; an account-only principal ("APP", from an import
// without sharing) has an empty actor, so it never shares keys with a user
// whose name is the account's ("APP/APP").
func scopedNS(principal, ns string) string {
	tenant, actor, ok := strings.Cut(principal, "/")
	if !ok && principal == protocol.Anonymous {
		actor = tenant
	}
	h := sha256.New()
	for _, part := range []string{tenant, actor, ns} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "ns1-" + hex.EncodeToString(h.Sum(nil))
}

// optionalBytes decodes an optional base64 field: absent or null is nil, a
// present value (even "") is non-nil.
func optionalBytes(field string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b []byte
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, protocol.BadRequest("%s: %v", field, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

type reshardReq struct {
	Graph string `json:"graph"`
	Shard int    `json:"shard"`
}

type graphReq struct {
	Graph string `json:"graph"`
}

type assignReq struct {
	Graph string  `json:"graph"`
	Shard int     `json:"shard"`
	Node  *uint32 `json:"node"`
}

type executeReq struct {
	Moves []rebalance.Move `json:"moves"`
}

func validGraph(g string) error {
	if !protocol.ValidName(g) {
		return protocol.BadRequest("bad graph name %q: want ^[A-Za-z0-9_-]{1,128}$", truncate(g))
	}
	return nil
}

// adminStore is the store's online-placement API. It is asserted at run
// time so the service builds against a store that does not have it yet;
// without it those admin ops answer 500.
type adminStore interface {
	Reshard(ctx context.Context, graph string, shard int) (from, to int, err error)
	CatalogGet(ctx context.Context, graph string) (store.CatalogEntry, error)
	CatalogAssign(ctx context.Context, graph string, shard int, node *uint32) error
	RebalancePlan(ctx context.Context, opts rebalance.Options) ([]rebalance.Move, error)
	RebalanceExecute(ctx context.Context, moves []rebalance.Move) ([]rebalance.Move, error)
}

// errNoAdmin is the answer of a placement op on a store without adminStore.
var errNoAdmin = &protocol.Error{Code: protocol.CodeInternal, Text: "INTERNAL: the store does not implement online placement yet"}

// adminDecoder returns the decoder of admin op op.
func (s *Service) adminDecoder(op string) func(string, []byte) (job, error) {
	st := s.cfg.Store
	var ad adminStore
	if st != nil {
		ad, _ = any(st).(adminStore)
	}
	wrap := func(fn func(ctx context.Context) (any, error)) (job, error) {
		if st == nil {
			return s.noStore()
		}
		return func(ctx context.Context, _ protocol.Caller) (any, error) {
			v, err := fn(ctx)
			return v, storeErr(err)
		}, nil
	}
	placement := func(fn func(ctx context.Context) (any, error)) (job, error) {
		return wrap(func(ctx context.Context) (any, error) {
			if ad == nil {
				return nil, errNoAdmin
			}
			return fn(ctx)
		})
	}
	switch op {
	case "graph_list":
		return decodeInto(func(_ string, _ *emptyReq) (job, error) {
			return wrap(func(ctx context.Context) (any, error) {
				gs, err := st.GraphList(ctx)
				if gs == nil {
					gs = []string{}
				}
				return map[string][]string{"graphs": gs}, err
			})
		})
	case "layout":
		return decodeInto(func(_ string, _ *emptyReq) (job, error) {
			return wrap(func(context.Context) (any, error) {
				l := st.Layout()
				if l.Files == nil {
					l.Files = []string{}
				}
				return l, nil
			})
		})
	case "reshard":
		return decodeInto(func(_ string, r *reshardReq) (job, error) {
			if err := validGraph(r.Graph); err != nil {
				return nil, err
			}
			if r.Shard < 0 {
				return nil, protocol.BadRequest("shard must not be negative")
			}
			return placement(func(ctx context.Context) (any, error) {
				from, to, err := ad.Reshard(ctx, r.Graph, r.Shard)
				return map[string]int{"from": from, "to": to}, err
			})
		})
	case "catalog_get":
		return decodeInto(func(_ string, r *graphReq) (job, error) {
			if err := validGraph(r.Graph); err != nil {
				return nil, err
			}
			return placement(func(ctx context.Context) (any, error) {
				e, err := ad.CatalogGet(ctx, r.Graph)
				if errors.Is(err, store.ErrNotFound) {
					return nil, protocol.NotFound("NOT_FOUND: graph %q has no catalog entry", r.Graph)
				}
				return e, err
			})
		})
	case "catalog_assign":
		return decodeInto(func(_ string, r *assignReq) (job, error) {
			if err := validGraph(r.Graph); err != nil {
				return nil, err
			}
			if r.Shard < 0 {
				return nil, protocol.BadRequest("shard must not be negative")
			}
			return placement(func(ctx context.Context) (any, error) {
				return struct{}{}, ad.CatalogAssign(ctx, r.Graph, r.Shard, r.Node)
			})
		})
	case "rebalance_plan":
		return decodeInto(func(_ string, r *rebalance.Options) (job, error) {
			if r.Tolerance < 0 || r.MaxMoves < 0 {
				return nil, protocol.BadRequest("tolerance and max_moves must not be negative")
			}
			return placement(func(ctx context.Context) (any, error) {
				moves, err := ad.RebalancePlan(ctx, *r)
				if moves == nil {
					moves = []rebalance.Move{}
				}
				return map[string][]rebalance.Move{"moves": moves}, err
			})
		})
	case "rebalance_execute":
		return decodeInto(func(_ string, r *executeReq) (job, error) {
			for _, m := range r.Moves {
				if err := validGraph(m.Graph); err != nil {
					return nil, err
				}
			}
			return placement(func(ctx context.Context) (any, error) {
				moves, err := ad.RebalanceExecute(ctx, r.Moves)
				if moves == nil {
					moves = []rebalance.Move{}
				}
				return map[string][]rebalance.Move{"moves": moves}, err
			})
		})
	}
	panic("service: no decoder for admin op " + op)
}

package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// On-disk layout of one shard file (bbolt):
//
//	<graph>/                 one top-level bucket per graph, named by the graph
//	  meta/   name, type, nodes, edges, bytes (u64 big endian counters)
//	  nodes/  id → node record
//	  labels/ lp(label) id → ""
//	  out/    lp(from) lp(type) to → edge props (JSON)
//	  in/     lp(to) lp(type) from → ""
//	  kv/     lp(ns) key → value
//
// lp(s) is s prefixed with its length as a uvarint, so a prefix scan on
// lp(from) cannot match a longer id. A node record is
// 0x01 uvarint(version) uvarint(#labels) {uvarint(len) label}* props-JSON.
// Moving a graph copies its bucket verbatim; nothing is decoded.

var (
	bMeta   = []byte("meta")
	bNodes  = []byte("nodes")
	bLabels = []byte("labels")
	bOut    = []byte("out")
	bIn     = []byte("in")
	bKV     = []byte("kv")

	mName  = []byte("name")
	mType  = []byte("type")
	mNodes = []byte("nodes")
	mEdges = []byte("edges")
	mBytes = []byte("bytes")

	emptyProps = json.RawMessage("{}")
)

const nodeRecordV1 = 0x01

var errCorrupt = errors.New("store: corrupt record")

func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readLP splits one length-prefixed string off b.
func readLP(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, errCorrupt
	}
	end := w + int(n)
	return string(b[w:end]), b[end:], nil
}

func lp(s string) []byte { return appendLP(nil, s) }

func edgeKey(a, typ, b string) []byte {
	k := appendLP(make([]byte, 0, len(a)+len(typ)+len(b)+4), a)
	k = appendLP(k, typ)
	return append(k, b...)
}

// decodeEdgeKey splits an out (or in) key into its three parts.
func decodeEdgeKey(k []byte) (a, typ, b string, err error) {
	a, rest, err := readLP(k)
	if err != nil {
		return "", "", "", err
	}
	typ, rest, err = readLP(rest)
	if err != nil {
		return "", "", "", err
	}
	return a, typ, string(rest), nil
}

func kvKey(ns, key string) []byte {
	return append(appendLP(make([]byte, 0, len(ns)+len(key)+2), ns), key...)
}

// decodeKVKey splits a kv key into namespace and key.
func decodeKVKey(k []byte) (ns, key string, err error) {
	ns, rest, err := readLP(k)
	if err != nil {
		return "", "", err
	}
	return ns, string(rest), nil
}

func encodeNode(version uint64, labels []string, props []byte) []byte {
	n := 1 + binary.MaxVarintLen64*2 + len(props)
	for _, l := range labels {
		n += len(l) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, nodeRecordV1)
	b = binary.AppendUvarint(b, version)
	b = binary.AppendUvarint(b, uint64(len(labels)))
	for _, l := range labels {
		b = appendLP(b, l)
	}
	return append(b, props...)
}

// decodeNode decodes a node record stored under id.
func decodeNode(id string, v []byte) (Node, error) {
	if len(v) == 0 || v[0] != nodeRecordV1 {
		return Node{}, fmt.Errorf("%w: node %q: bad record version", errCorrupt, id)
	}
	b := v[1:]
	version, w := binary.Uvarint(b)
	if w <= 0 {
		return Node{}, fmt.Errorf("%w: node %q: bad version", errCorrupt, id)
	}
	b = b[w:]
	nl, w := binary.Uvarint(b)
	if w <= 0 || nl > uint64(len(b)) {
		return Node{}, fmt.Errorf("%w: node %q: bad label count", errCorrupt, id)
	}
	b = b[w:]
	labels := make([]string, 0, nl)
	for range nl {
		var l string
		var err error
		l, b, err = readLP(b)
		if err != nil {
			return Node{}, fmt.Errorf("%w: node %q: bad label", errCorrupt, id)
		}
		labels = append(labels, l)
	}
	props := json.RawMessage(slices.Clone(b))
	if len(props) == 0 {
		props = slices.Clone(emptyProps)
	}
	return Node{ID: id, Labels: labels, Props: props, Version: version}, nil
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func putU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// normLabels returns labels sorted and deduplicated.
func normLabels(labels []string) []string {
	out := slices.Clone(labels)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// compactObject validates that raw is a JSON object (nil or empty means {})
// and returns it compacted.
func compactObject(field string, raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []byte("{}"), nil
	}
	if len(raw) > MaxPropsBytes {
		return nil, tooLarge(field, len(raw), MaxPropsBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("%s is not valid JSON: %v", field, err)
	}
	b := buf.Bytes()
	if len(b) == 0 || b[0] != '{' {
		return nil, invalid("%s is not a JSON object", field)
	}
	return b, nil
}

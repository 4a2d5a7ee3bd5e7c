package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzDecodeNode: decoding a stored node record never panics, and a record
// that decodes re-encodes to the same bytes.
func FuzzDecodeNode(f *testing.F) {
	f.Add(encodeNode(1, []string{"a", "b"}, []byte(`{"x":1}`)))
	f.Add(encodeNode(1<<40, nil, nil))
	f.Add([]byte{nodeRecordV1, 0x80})
	f.Add([]byte{nodeRecordV1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeNode("id", b)
		if err != nil {
			return
		}
		props := []byte(n.Props)
		if bytes.Equal(props, emptyProps) && len(b) > 0 && !bytes.HasSuffix(b, emptyProps) {
			props = nil
		}
		if got := encodeNode(n.Version, n.Labels, props); !bytes.Equal(got, b) {
			// Non-minimal uvarints decode but re-encode shorter; the
			// decoded node must still be stable.
			n2, err := decodeNode("id", got)
			if err != nil || n2.Version != n.Version || !slices.Equal(n2.Labels, n.Labels) {
				t.Fatalf("re-encode changed %+v into %+v (%v)", n, n2, err)
			}
		}
	})
}

// FuzzDecodeEdgeKey: edge and KV keys round-trip and never panic.
func FuzzDecodeEdgeKey(f *testing.F) {
	f.Add(edgeKey("a", "t", "b"), "a", "t", "b")
	f.Add([]byte{0xff}, "", "x", "")
	f.Add(kvKey("ns", "key"), "ns", "", "key")
	f.Fuzz(func(t *testing.T, k []byte, a, typ, b string) {
		decodeEdgeKey(k)
		decodeKVKey(k)
		x, y, z, err := decodeEdgeKey(edgeKey(a, typ, b))
		if err != nil || x != a || y != typ || z != b {
			t.Fatalf("edge key (%q,%q,%q) → (%q,%q,%q) %v", a, typ, b, x, y, z, err)
		}
		ns, key, err := decodeKVKey(kvKey(a, b))
		if err != nil || ns != a || key != b {
			t.Fatalf("kv key (%q,%q) → (%q,%q) %v", a, b, ns, key, err)
		}
	})
}

// FuzzBatchOp: decoding a wire batch op and validating it never panics;
// an accepted op names a known operation.
func FuzzBatchOp(f *testing.F) {
	f.Add(`{"op":"node_put","id":"a","labels":["x"],"props":{"k":1}}`)
	f.Add(`{"op":"kv_put","ns":"n","key":"k","value":"aGk="}`)
	f.Add(`{"op":"node_cas","id":"a","if":{"x":null},"set":{"y":[1]}}`)
	f.Add(`{"op":"edge_put","from":"a","type":"t","to":"b","props":[]}`)
	f.Add(`{"op":"nope"}`)
	f.Fuzz(func(t *testing.T, body string) {
		var o Op
		if json.Unmarshal([]byte(body), &o) != nil {
			return
		}
		if _, err := checkOp(0, o); err == nil {
			switch o.Op {
			case OpNodePut, OpNodeCreate, OpNodeDelete, OpNodeCAS, OpEdgePut, OpEdgeDelete, OpKVPut, OpKVDelete, OpKVCAS:
			default:
				t.Fatalf("accepted unknown op %q", o.Op)
			}
		}
	})
}

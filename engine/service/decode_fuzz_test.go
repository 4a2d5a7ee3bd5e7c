package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/edictrt/edict/engine/protocol"
)

// FuzzDecoders feeds arbitrary bodies to every graph and admin decoder: a
// decoder either builds a job or answers 400/413, and never panics.
func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"id":"a"}`, `{"id":"a","labels":["x"],"props":{"k":1}}`, `{"id":`, `{"id":"a"} {}`, `[]`, `null`,
		`{"ops":[{"op":"node_put","id":"a"},{"op":"kv_put","ns":"n","key":"k","value":"dg=="}]}`,
		`{"ns":"n","key":"k","expected":"","new":null}`, `{"from":"a","depth":-1}`, `{"graph":"g","shard":1}`,
		`{"moves":[{"graph":"g","from":0,"to":1}]}`, `{"tolerance":-1}`, `{"ns":"` + strings.Repeat("n", 300) + `"}`,
	} {
		f.Add(s)
	}
	s := &Service{}
	var decs []func(string, []byte) (job, error)
	for _, op := range GraphOps {
		decs = append(decs, s.graphDecoder(op))
	}
	for _, op := range AdminOps {
		decs = append(decs, s.adminDecoder(op))
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, dec := range decs {
			j, err := dec("g", []byte(body))
			if err == nil {
				if j == nil {
					t.Fatal("nil job without error")
				}
				continue
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || (pe.Code != 400 && pe.Code != 413) {
				t.Fatalf("decode error %v is not a 400/413 protocol error", err)
			}
		}
	})
}

func FuzzGraphToken(f *testing.F) {
	for _, s := range []string{"edict.eg.g.node_get", "edict.eg.a.b.node_get", "edict.eg..x", "edict.eg.", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		g := graphToken(subject)
		if protocol.ValidName(g) && strings.Contains(g, ".") {
			t.Fatalf("valid graph %q with a dot", g)
		}
	})
}

package admission_test

import (
	"testing"

	"github.com/edictrt/edict/engine/admission"
)

func TestRequiresWrite(t *testing.T) {
	writes := []string{
		"node_put", "node_create", "node_delete", "node_cas", "edge_put", "edge_delete", "batch",
		"kv_put", "kv_delete", "kv_cas", "graph_create", "graph_delete", "graph_clear",
		"submit", "claim", "ack", "retry", "defer", "extend", "dead", "dead_replay",
		"reshard", "catalog_assign", "rebalance_execute",
		// unknown ops fail closed
		"", "cypher", "NODE_GET", "node_get ", "frobnicate",
	}
	reads := []string{
		"node_get", "nodes_by_label", "edge_get", "neighbors", "traverse", "kv_get", "kv_scan",
		"stats", "dead_list", "graph_list", "catalog_get", "rebalance_plan", "layout",
	}
	for _, op := range writes {
		if !admission.RequiresWrite(op) {
			t.Errorf("RequiresWrite(%q) = false, want true", op)
		}
	}
	for _, op := range reads {
		if admission.RequiresWrite(op) {
			t.Errorf("RequiresWrite(%q) = true, want false", op)
		}
	}
}

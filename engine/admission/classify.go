package admission

// RequiresWrite reports whether op (an operation name of any of the three
// families: node_get, claim, graph_list, …) must be admitted as a write.
// It fails closed: an operation it does not list as a read is a write. The
// op name is matched exactly.
func RequiresWrite(op string) bool {
	switch op {
	case "node_get", "nodes_by_label", "edge_get", "neighbors", "traverse", // graph reads
		"kv_get", "kv_scan", // KV reads
		"stats",                                                 // graph stats and work stats
		"dead_list",                                             // work reads
		"graph_list", "catalog_get", "rebalance_plan", "layout": // admin reads
		return false
	}
	return true
}

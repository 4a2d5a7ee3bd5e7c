package catalog

// Sanitize maps a graph name to the name its route is hashed from: every
// character that is an ASCII letter, digit or one of "-_." is kept; every
// other character, each multi-byte UTF-8 character (or invalid byte) counted
// once, becomes "_" ("agent:42" → "agent_42", "héllo" → "h_llo"). Valid wire
// graph names are unchanged.
func Sanitize(graph string) string {
	clean := true
	for i := 0; i < len(graph); i++ {
		if !keep(graph[i]) {
			clean = false
			break
		}
	}
	if clean {
		return graph
	}
	out := make([]byte, 0, len(graph))
	for _, r := range graph {
		if r < 0x80 && keep(byte(r)) {
			out = append(out, byte(r))
		} else {
			out = append(out, '_')
		}
	}
	return string(out)
}

func keep(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
		b == '-' || b == '_' || b == '.'
}

// HashShard is the hash route: FNV-1a 64-bit over the bytes of
// Sanitize(graph), modulo k; k ≤ 1 gives 0.
func HashShard(graph string, k int) int {
	if k <= 1 {
		return 0
	}
	h := uint64(0xcbf29ce484222325)
	s := Sanitize(graph)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return int(h % uint64(k))
}

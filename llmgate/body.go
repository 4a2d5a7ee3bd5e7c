package llmgate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// body is what the Transport learns from a JSON request body.
type body struct {
	model string   // top-level "model" when a string (the last one wins)
	open  int      // offset just after the object's '{'
	empty bool     // the object has no members
	prio  [][2]int // spans of every top-level "priority" value
}

// scanBody reads a request body that should be one JSON object. ok is false
// when it is not; the body is then sent as it is.
func scanBody(b []byte) (info body, ok bool) {
	if !json.Valid(b) {
		return body{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if d, isDelim := tok.(json.Delim); err != nil || !isDelim || d != '{' {
		return body{}, false
	}
	info.open, info.empty = int(dec.InputOffset()), true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return body{}, false
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return body{}, false
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if start < 0 || !bytes.Equal(b[start:end], raw) {
			return body{}, false
		}
		info.empty = false
		switch key {
		case "model":
			info.model = ""
			_ = json.Unmarshal(raw, &info.model) // not a string: no model
		case "priority":
			info.prio = append(info.prio, [2]int{start, end})
		}
	}
	return info, true
}

// withPriority returns b with the top-level "priority" set to rank: every
// existing member's value replaced, or a member added first. Other members
// keep their bytes and order.
func withPriority(b []byte, info body, rank int) []byte {
	v := strconv.AppendInt(nil, int64(rank), 10)
	out := make([]byte, 0, len(b)+len(`"priority":,`)+len(v))
	if len(info.prio) == 0 {
		out = append(out, b[:info.open]...)
		out = append(out, `"priority":`...)
		out = append(out, v...)
		if !info.empty {
			out = append(out, ',')
		}
		return append(out, b[info.open:]...)
	}
	last := 0
	for _, s := range info.prio {
		out = append(out, b[last:s[0]]...)
		out = append(out, v...)
		last = s[1]
	}
	return append(out, b[last:]...)
}

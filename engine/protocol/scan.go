package protocol

import "encoding/json"

// The scanner below walks JSON that encoding/json has already accepted, so
// it does no validation of its own: it only finds where each object member
// and array element begins and ends.

// eachMember calls visit with each member of the JSON object raw, in body
// order; key is only valid during the call. A raw that is not an object
// (null) has no members.
func eachMember(raw []byte, visit func(key, val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			return nil
		}
		end := skipString(raw, i)
		key := keyText(raw[i:end])
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		vend := skipValue(raw, i)
		if err := visit(key, raw[i:vend]); err != nil {
			return err
		}
		i = skipSpace(raw, vend)
		if i < len(raw) && raw[i] == ',' {
			i++
		}
	}
}

// eachElement calls visit with each element of the JSON array raw. A raw
// that is not an array (null) has no elements.
func eachElement(raw []byte, visit func(val []byte) error) error {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] == ']' {
			return nil
		}
		end := skipValue(raw, i)
		if err := visit(raw[i:end]); err != nil {
			return err
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i++
		}
	}
}

// keyText returns a quoted key's text, unescaping it (which allocates)
// only when it holds an escape.
func keyText(quoted []byte) []byte {
	for _, c := range quoted {
		if c == '\\' {
			var s string
			_ = json.Unmarshal(quoted, &s)
			return []byte(s)
		}
	}
	if len(quoted) < 2 {
		return nil
	}
	return quoted[1 : len(quoted)-1]
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return len(b)
}

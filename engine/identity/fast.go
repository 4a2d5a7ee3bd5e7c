package identity

import "strings"

// principalFast extracts acc and user from raw without encoding/json when
// raw is a JSON object this small scanner fully understands (as the NATS
// server writes it); ok is false for anything else, and the caller falls
// back to encoding/json. Whatever it accepts is valid JSON, and on it the
// result equals json.Unmarshal's: the fuzz test FuzzRequestInfoFastPath
// holds the two to that.
func principalFast(raw string) (acc, user string, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return "", "", false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return "", "", skipSpace(raw, i+1) == len(raw)
	}
	for {
		// Key: a plain string without escapes or non-ASCII bytes.
		if i >= len(raw) || raw[i] != '"' {
			return "", "", false
		}
		end := strings.IndexByte(raw[i+1:], '"')
		if end < 0 {
			return "", "", false
		}
		key := raw[i+1 : i+1+end]
		if !plain(key) {
			return "", "", false
		}
		i = skipSpace(raw, i+2+end)
		if i >= len(raw) || raw[i] != ':' {
			return "", "", false
		}
		i = skipSpace(raw, i+1)
		field := 0
		switch {
		case key == "acc":
			field = 1
		case key == "user":
			field = 2
		case strings.EqualFold(key, "acc") || strings.EqualFold(key, "user"):
			return "", "", false // encoding/json matches keys case-insensitively
		}
		if field != 0 {
			// The value of a wanted field: a plain string.
			if i >= len(raw) || raw[i] != '"' {
				return "", "", false
			}
			end := strings.IndexByte(raw[i+1:], '"')
			if end < 0 {
				return "", "", false
			}
			v := raw[i+1 : i+1+end]
			if !plain(v) {
				return "", "", false
			}
			if field == 1 {
				acc = v
			} else {
				user = v
			}
			i += 2 + end
		} else {
			var good bool
			if i, good = skipValue(raw, i, 0); !good {
				return "", "", false
			}
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return "", "", false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return acc, user, skipSpace(raw, i+1) == len(raw)
		default:
			return "", "", false
		}
	}
}

// plain reports whether s needs no unescaping: printable ASCII without a
// backslash.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// maxDepth bounds the nesting skipValue follows before giving up.
const maxDepth = 8

// skipValue returns the index after the JSON value at s[i:], or false when
// it is not one this scanner accepts.
func skipValue(s string, i, depth int) (int, bool) {
	if i >= len(s) || depth > maxDepth {
		return i, false
	}
	switch c := s[i]; {
	case c == '"':
		return skipString(s, i)
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == closer {
			return i + 1, true
		}
		for {
			if c == '{' {
				var ok bool
				if i, ok = skipString(s, i); !ok {
					return i, false
				}
				i = skipSpace(s, i)
				if i >= len(s) || s[i] != ':' {
					return i, false
				}
				i = skipSpace(s, i+1)
			}
			var ok bool
			if i, ok = skipValue(s, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(s, i)
			if i >= len(s) {
				return i, false
			}
			if s[i] == closer {
				return i + 1, true
			}
			if s[i] != ',' {
				return i, false
			}
			i = skipSpace(s, i+1)
		}
	case c == 't':
		return i + 4, strings.HasPrefix(s[i:], "true")
	case c == 'f':
		return i + 5, strings.HasPrefix(s[i:], "false")
	case c == 'n':
		return i + 4, strings.HasPrefix(s[i:], "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(s, i)
	}
	return i, false
}

// skipString skips a string whose escapes are the simple ones (a \u
// escape: false). Bytes from 0x7f up pass: the value is discarded, and
// encoding/json does not reject invalid UTF-8 either.
func skipString(s string, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return i, false
	}
	for i++; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(s) || !strings.ContainsRune(`"\/bfnrt`, rune(s[i])) {
				return i, false
			}
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

// skipNumber skips a JSON number.
func skipNumber(s string, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j, j > i
	}
	if s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	if i < len(s) && s[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}

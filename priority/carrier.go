package priority

import "strings"

// Carrier is a propagation.TextMapCarrier over a map[string][]string such as
// nats.Header, for which header names are case-sensitive on the wire. Get
// prefers an exact match and otherwise matches names case-insensitively;
// Set replaces every case variant of the name; Keys lists names as sent.
// Convert with priority.Carrier(msg.Header); a nil map reads as empty and
// panics on Set, like any nil map.
type Carrier map[string][]string

// Get returns the first value of the header key, matched exactly first and
// then in any letter case, or "" when absent.
func (c Carrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces every case variant of key with the single value.
func (c Carrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

// Keys lists the header names as they were sent.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

package leases

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// encodeRecord returns the compact record {"version":1,"expires_at":<t>}
// with t in unix seconds.
func encodeRecord(expires time.Time) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"version":1,"expires_at":`...)
	b = strconv.AppendFloat(b, unixSeconds(expires), 'f', -1, 64)
	return append(b, '}')
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// parseRecord decodes a lease record and returns its expires_at in unix
// seconds. ok is false unless data is a JSON object whose version equals 1
// numerically and whose expires_at is a finite number (spec steps 3–5).
// It never panics, whatever data holds.
func parseRecord(data []byte) (expiresAt float64, ok bool) {
	if len(data) > MaxRecordSize {
		return 0, false
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return 0, false // an array, null, a number or a string
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return 0, false
	}
	version, ok := number(obj["version"])
	if !ok || version != 1 {
		return 0, false
	}
	exp, ok := number(obj["expires_at"])
	if !ok || math.IsNaN(exp) || math.IsInf(exp, 0) {
		return 0, false
	}
	return exp, true
}

// number decodes raw as a JSON number; a bool, string, null, object or
// array is not one.
func number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false
	}
	f, ok := v.(float64)
	return f, ok
}

package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Extra string `json:"extra"`
}

type op struct {
	Op string `json:"op"`
	ID string `json:"id"`
}

type decodeTarget struct {
	inner
	ID     string   `json:"id"`
	Labels []string `json:"labels,omitempty"`
	Skip   string   `json:"-"`
	Plain  int
	Ops    []op              `json:"ops"`
	One    *op               `json:"one"`
	Props  map[string]string `json:"props"`
	Nested map[string][]op   `json:"nested"`
	Bytes  []byte            `json:"bytes"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
		want string // substring of the error
	}{
		{``, true, ""},
		{`{}`, true, ""},
		{`null`, true, ""},
		{`{"id":"a","labels":["x"],"extra":"e","Plain":1}`, true, ""},
		{`{"ID":"a"}`, false, `unknown field "ID"`},
		{`{"id":"a","Id":"b"}`, false, `unknown field "Id"`},
		{`{"Skip":"x"}`, false, "unknown field"},
		{`{"-":"x"}`, false, "unknown field"},
		{`{"plain":1}`, false, `unknown field "plain"`},
		{`{"nope":1}`, false, "unknown field"},
		{`{"ops":[{"op":"a","id":"x"},{"op":"b"}],"one":{"id":"y"},"props":{"ANY":"case"},"bytes":"AAE="}`, true, ""},
		{`{"ops":[{"op":"a"},{"Op":"b"}]}`, false, `unknown field "ops.1.Op"`},
		{`{"one":{"ID":"y"}}`, false, `unknown field "one.ID"`},
		{`{"ops":null,"one":null}`, true, ""},
		{`{"id":"a"} {"id":"b"}`, false, "trailing data"},
		{`{"id":`, false, "malformed"},
		{`[]`, false, "malformed"},
		{`{"nested":{"a":[{"op":"x"}],"B":null}}`, true, ""},
		{`{"nested":{"a":[{"op":"x"},{"OP":"y"}]}}`, false, `unknown field "nested.a.1.OP"`},
		{`{"id":"a\"b","one":{"op":"}]{[\\"}}`, true, ""},
		{` {"ops" : [ {"op" : "a" } , { "id" : "b" } ] } `, true, ""},
		{`{"i\u0064":"a"}`, true, ""},
		{`{"\u0049D":"a"}`, false, `unknown field "ID"`},
	}
	for _, tt := range tests {
		var v decodeTarget
		err := Decode([]byte(tt.body), &v)
		if tt.ok {
			if err != nil {
				t.Errorf("Decode(%s) = %v", tt.body, err)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeBadRequest || !strings.Contains(pe.Text, tt.want) {
			t.Errorf("Decode(%s) = %v, want 400 containing %q", tt.body, err, tt.want)
		}
	}
}

// FuzzDecode checks that every error is a 400 and that Decode's fast path
// accepts exactly what the streaming decoder accepts, with the same result.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"id":"a"}`, `{"ID":1}`, `{"extra":"x","labels":[]}`, `nul`, `{"id":"\u0041"}`,
		`{"ops":[{"op":"a","id":"x"}],"one":{"id":"y"},"props":{"k":"v"},"nested":{"a":[{"op":"b"}]}}`, `{"id":"a"} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, slow decodeTarget
		err := Decode(body, &fast)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeBadRequest {
				t.Fatalf("Decode error %v is not a 400", err)
			}
		}
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 {
			trimmed = []byte("{}")
		}
		serr := decodeSlow(trimmed, &slow)
		if (err == nil) != (serr == nil) {
			t.Fatalf("Decode(%q) = %v, streaming decoder = %v", body, err, serr)
		}
		if err == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("Decode(%q) = %+v, streaming decoder %+v", body, fast, slow)
		}
	})
}

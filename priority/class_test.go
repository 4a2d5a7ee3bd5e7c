package priority_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edictrt/edict/priority"
)

func TestClassTable(t *testing.T) {
	tests := []struct {
		c     priority.Class
		name  string
		rank  int
		high  bool
		order int
	}{
		{priority.Interactive, "interactive", 0, true, 0},
		{priority.Orchestration, "orchestration", 1, true, 1},
		{priority.Hydration, "hydration", 1, true, 2},
		{priority.BackgroundIngestion, "background_ingestion", 3, false, 3},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.name {
			t.Errorf("String() = %q, want %q", got, tt.name)
		}
		if got := tt.c.Rank(); got != tt.rank {
			t.Errorf("%v.Rank() = %d, want %d", tt.c, got, tt.rank)
		}
		if got := tt.c.High(); got != tt.high {
			t.Errorf("%v.High() = %v, want %v", tt.c, got, tt.high)
		}
		if got := tt.c.Order(); got != tt.order {
			t.Errorf("%v.Order() = %d, want %d", tt.c, got, tt.order)
		}
		if got := priority.Attribute(tt.c); string(got.Key) != "edict.priority.class" || got.Value.AsString() != tt.name {
			t.Errorf("Attribute(%v) = %v", tt.c, got)
		}
	}
}

func TestClampAndOrder(t *testing.T) {
	if !priority.Orchestration.Higher(priority.Hydration) || priority.Hydration.Higher(priority.Orchestration) {
		t.Error("Orchestration must be ordered before Hydration")
	}
	if got := priority.Interactive.Clamp(priority.BackgroundIngestion); got != priority.BackgroundIngestion {
		t.Errorf("Interactive clamped to background = %v", got)
	}
	if got := priority.BackgroundIngestion.Clamp(priority.Interactive); got != priority.BackgroundIngestion {
		t.Errorf("background clamped to interactive = %v", got)
	}
	if got := priority.Interactive.Clamp(priority.Hydration); got != priority.Hydration {
		t.Errorf("Interactive clamped to hydration = %v", got)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want priority.Class
		ok   bool
	}{
		{"interactive", priority.Interactive, true},
		{" INTERACTIVE ", priority.Interactive, true},
		{"\tOrchestration\n", priority.Orchestration, true},
		{"Hydration", priority.Hydration, true},
		{"background_ingestion", priority.BackgroundIngestion, true},
		{"BACKGROUND_INGESTION", priority.BackgroundIngestion, true},
		{"", 0, false},
		{"   ", 0, false},
		{"bogus", 0, false},
		{"background ingestion", 0, false},
		{"0", 0, false},
		{"interactive,", 0, false},
		{"inter\x00active", 0, false},
		{strings.Repeat("interactive", 1000), 0, false},
		{strings.Repeat(" ", 100) + "interactive", 0, false},
	}
	for _, tt := range tests {
		got, err := priority.Parse(tt.in)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, priority.ErrUnknownClass) {
			t.Errorf("Parse(%q) error = %v, want ErrUnknownClass", tt.in, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("Parse error text is %d bytes; hostile input must not be echoed whole", len(err.Error()))
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	type doc struct {
		Class priority.Class            `json:"class"`
		By    map[priority.Class]string `json:"by"`
	}
	in := doc{Class: priority.Hydration, By: map[priority.Class]string{priority.Interactive: "a"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"class":"hydration","by":{"interactive":"a"}}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Class != priority.Hydration || out.By[priority.Interactive] != "a" {
		t.Fatalf("round trip = %+v", out)
	}
	if err := json.Unmarshal([]byte(`{"class":"urgent"}`), &out); !errors.Is(err, priority.ErrUnknownClass) {
		t.Fatalf("unknown class in JSON: err = %v", err)
	}
	if _, err := json.Marshal(priority.Class(0)); err == nil {
		t.Fatal("marshalling the zero Class must fail")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"interactive", " HYDRATION ", "", "background ingestion", "\xff\xfe", strings.Repeat("x", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := priority.Parse(s)
		if err != nil {
			if !errors.Is(err, priority.ErrUnknownClass) {
				t.Fatalf("Parse(%q): error %v does not wrap ErrUnknownClass", s, err)
			}
			return
		}
		if !c.Valid() {
			t.Fatalf("Parse(%q) = invalid class %d", s, c)
		}
		if !strings.EqualFold(strings.TrimSpace(s), c.String()) {
			t.Fatalf("Parse(%q) = %v", s, c)
		}
		again, err := priority.Parse(c.String())
		if err != nil || again != c {
			t.Fatalf("canonical name %q does not round-trip", c)
		}
	})
}

package llmgate

import (
	"strconv"
	"testing"
)

func TestAutoReserve(t *testing.T) {
	want := []int{0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5}
	for i, w := range want {
		if got := autoReserve(i+1, DefaultReserveFraction); got != w {
			t.Errorf("autoReserve(%d) = %d, want %d", i+1, got, w)
		}
	}
	tests := []struct {
		capacity int
		fraction float64
		want     int
	}{
		{32, 0.34, 11},
		{25, 0.34, 8}, // 8.5 rounds half to even
		{125, 0.34, 42},
		{5, 0.5, 2},
		{9, 0.5, 4},
		{8, 0, 1},     // floor 1
		{8, 2, 7},     // ceiling capacity-1
		{8, 1e300, 7}, // no overflow
		{1, 0.9, 0},
		{0, 0.34, 0},
	}
	for _, tt := range tests {
		if got := autoReserve(tt.capacity, tt.fraction); got != tt.want {
			t.Errorf("autoReserve(%d, %v) = %d, want %d", tt.capacity, tt.fraction, got, tt.want)
		}
	}
}

func TestExplicitReserve(t *testing.T) {
	tests := []struct{ capacity, reserve, want int }{
		{8, 2, 2},
		{8, 8, 7},
		{8, 100, 7},
		{1, 5, 0},
		{8, NoReserve, 0},
		{8, -7, 0},
		{8, 0, 3},
	}
	for _, tt := range tests {
		g := newGate(t, Config{Capacity: tt.capacity, Reserve: tt.reserve})
		if got := g.Reserve(); got != tt.want {
			t.Errorf("capacity %d Reserve %d: reserve = %d, want %d", tt.capacity, tt.reserve, got, tt.want)
		}
	}
}

func TestReserveFromEnvironment(t *testing.T) {
	tests := []struct {
		name, reserve, fraction string
		capacity, want          int
	}{
		{"unset", "", "", 8, 3},
		{"absolute", "2", "", 8, 2},
		{"absolute trimmed", " 2 ", "", 8, 2},
		{"absolute zero", "0", "", 8, 0},
		{"absolute clamped", "50", "", 8, 7},
		{"absolute wins over fraction", "1", "0.9", 8, 1},
		{"absolute not an integer", "2.5", "", 8, 3},
		{"absolute negative", "-1", "", 8, 3},
		{"absolute text", "lots", "0.5", 8, 4},
		{"fraction", "", "0.5", 9, 4},
		{"fraction trimmed", "", " 0.5 ", 5, 2},
		{"fraction zero", "", "0", 8, 1},
		{"fraction NaN", "", "NaN", 8, 3},
		{"fraction Inf", "", "Inf", 8, 3},
		{"fraction -Inf", "", "-Inf", 8, 3},
		{"fraction negative", "", "-0.5", 8, 3},
		{"fraction text", "", "a third", 8, 3},
		{"fraction overflow", "", "1e400", 8, 3},
		{"capacity one ignores env", "3", "0.9", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvReserve, tt.reserve)
			t.Setenv(EnvReserveFraction, tt.fraction)
			g, err := New(Config{Capacity: tt.capacity})
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Reserve(); got != tt.want {
				t.Fatalf("reserve = %d, want %d", got, tt.want)
			}
		})
	}
}

// The environment is read when the gate is built: a resize re-derives the
// reserve from the settings read then.
func TestEnvironmentReadOnce(t *testing.T) {
	t.Setenv(EnvReserve, "2")
	r := NewRegistry(Config{})
	g := r.Gate("m", 8)
	t.Setenv(EnvReserve, "5")
	if got := g.Reserve(); got != 2 {
		t.Fatalf("reserve = %d, want 2", got)
	}
	r.Gate("m", 16)
	if got := g.Reserve(); got != 2 {
		t.Fatalf("after resize: reserve = %d, want 2 (read when built)", got)
	}
	if got := r.Gate("other", 16).Reserve(); got != 5 {
		t.Fatalf("new gate: reserve = %d, want 5", got)
	}
}

func FuzzReserveEnvironment(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {" 2 ", ""}, {"2.5", "0.5"}, {"-1", "NaN"}, {"", "Inf"},
		{"", "-0"}, {"99999999999999999999", "1e400"}, {"0x10", "0x1p-2"}, {"", "+Inf"}} {
		f.Add(s[0], s[1], 8)
	}
	f.Fuzz(func(t *testing.T, reserve, fraction string, capacity int) {
		env := map[string]string{EnvReserve: reserve, EnvReserveFraction: fraction}
		g, err := build(Config{Capacity: capacity}, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		c, r := g.Capacity(), g.Reserve()
		if c != max(1, capacity) {
			t.Fatalf("capacity %d from %d", c, capacity)
		}
		if c == 1 && r != 0 || c > 1 && (r < 0 || r > c-1) {
			t.Fatalf("reserve %d out of range for capacity %d", r, c)
		}
		if v, ok := parseReserve(reserve); ok {
			if w, err := strconv.Atoi(stringsTrim(reserve)); err != nil || w != v || v < 0 {
				t.Fatalf("parseReserve(%q) = %d", reserve, v)
			}
			if c > 1 && r != min(v, c-1) {
				t.Fatalf("reserve %d, want %d from %q", r, min(v, c-1), reserve)
			}
		} else if c > 1 && r < 1 {
			t.Fatalf("auto reserve %d below 1 for capacity %d", r, c)
		}
	})
}

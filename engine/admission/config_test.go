package admission_test

import (
	"testing"
	"time"

	"github.com/edictrt/edict/engine/admission"
)

func TestConfigResolve(t *testing.T) {
	tests := []struct {
		cpus int
		in   admission.Config
		want admission.Config
	}{
		{1, admission.Config{}, admission.Config{256, 64, 32}},
		{4, admission.Config{}, admission.Config{256, 64, 32}},
		{8, admission.Config{}, admission.Config{512, 128, 64}},
		{64, admission.Config{}, admission.Config{4096, 1024, 512}},
		{1024, admission.Config{}, admission.Config{8192, 2048, 1024}},
		{0, admission.Config{}, admission.Config{256, 64, 32}},
		{4, admission.Config{MaxInFlight: 2}, admission.Config{2, 1, 8}},
		{4, admission.Config{MaxInFlight: 100000}, admission.Config{100000, 25000, 1024}},
		{4, admission.Config{MaxInFlight: 16, PerGraph: 3, ReadReserved: 5}, admission.Config{16, 3, 5}},
	}
	for _, tt := range tests {
		if got := tt.in.Resolve(tt.cpus); got != tt.want {
			t.Errorf("%+v.Resolve(%d) = %+v, want %+v", tt.in, tt.cpus, got, tt.want)
		}
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want admission.Config
	}{
		{nil, admission.Config{}},
		{map[string]string{"EDICT_MAX_INFLIGHT": "64", "EDICT_MAX_INFLIGHT_PER_GRAPH": " 8 ", "EDICT_READ_RESERVED": "3"}, admission.Config{64, 8, 3}},
		{map[string]string{"EDICT_MAX_INFLIGHT": "0", "EDICT_MAX_INFLIGHT_PER_GRAPH": "-1", "EDICT_READ_RESERVED": "x"}, admission.Config{}},
	}
	for _, tt := range tests {
		if got := admission.ConfigFromEnv(env(tt.env)); got != tt.want {
			t.Errorf("ConfigFromEnv(%v) = %+v, want %+v", tt.env, got, tt.want)
		}
	}
}

func TestDispatchDeadlineFromEnv(t *testing.T) {
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 600 * time.Second},
		{"0", 600 * time.Second},
		{"abc", 600 * time.Second},
		{"1", time.Second},
		{"30", 30 * time.Second},
		{"999999", 86400 * time.Second},
	}
	for _, tt := range tests {
		if got := admission.DispatchDeadlineFromEnv(env(map[string]string{"EDICT_DISPATCH_DEADLINE": tt.v})); got != tt.want {
			t.Errorf("deadline(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestQoSConfigFromEnv(t *testing.T) {
	for _, v := range []string{"1", "true", " ON ", "Yes"} {
		if !admission.QoSConfigFromEnv(env(map[string]string{"EDICT_QOS": v})).Enabled {
			t.Errorf("EDICT_QOS=%q did not enable QoS", v)
		}
	}
	for _, v := range []string{"", "0", "false", "off", "enabled"} {
		if admission.QoSConfigFromEnv(env(map[string]string{"EDICT_QOS": v})).Enabled {
			t.Errorf("EDICT_QOS=%q enabled QoS", v)
		}
	}
	c := admission.QoSConfigFromEnv(env(map[string]string{"EDICT_QOS_CAPACITY": "32", "EDICT_QOS_PRINCIPAL_QUOTA": "5"}))
	if c.Capacity != 32 || c.PrincipalQuota != 5 {
		t.Errorf("QoS sizes = %+v", c)
	}
}

func FuzzConfigFromEnv(f *testing.F) {
	for _, s := range []string{"", "0", "1", "-5", " 12 ", "1e3", "99999999999999999999", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := admission.ConfigFromEnv(func(string) string { return s })
		if c.MaxInFlight < 0 || c.PerGraph < 0 || c.ReadReserved < 0 {
			t.Fatalf("negative size from %q: %+v", s, c)
		}
		r := c.Resolve(4)
		if r.MaxInFlight < 1 || r.PerGraph < 1 || r.ReadReserved < 1 {
			t.Fatalf("resolved size below 1 from %q: %+v", s, r)
		}
		d := admission.DispatchDeadlineFromEnv(func(string) string { return s })
		if d < time.Second || d > admission.MaxDispatchDeadline {
			t.Fatalf("deadline %v out of range from %q", d, s)
		}
	})
}

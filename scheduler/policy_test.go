package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edictrt/edict/priority"
)

func TestInteractiveFloor(t *testing.T) {
	for _, tc := range []struct{ wc, reserved, want int }{
		{1, 1, 0}, {1, 0, 0}, {2, 0, 1}, {2, 5, 1}, {4, 0, 1}, {4, 2, 2}, {8, 3, 3}, {0, 1, 0},
	} {
		p := NewPolicy(PolicyConfig{Workers: tc.wc, Reserved: tc.reserved}, nil)
		if got := p.InteractiveFloor(); got != tc.want {
			t.Errorf("InteractiveFloor(wc=%d, reserved=%d) = %d, want %d", tc.wc, tc.reserved, got, tc.want)
		}
	}
}

type running struct{ lane, taskType string }

func TestDecide(t *testing.T) {
	cases := []struct {
		name     string
		cfg      PolicyConfig
		running  []running
		lane     string
		taskType string
		pending  map[string]int
		want     Decision
	}{
		{
			name:    "rule 1: explicit codebase cap",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, CodebaseCap: 2, Shards: 4},
			running: []running{{"ingestion", "codebase"}, {"ingestion", "codebase"}},
			lane:    "ingestion", taskType: "codebase",
			want: deny("codebase_cap reached (2)"),
		},
		{
			name:    "rule 1: derived codebase cap from shards",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 3, Shards: 2},
			running: []running{{"ingestion", "codebase"}, {"ingestion", "codebase"}},
			lane:    "ingestion", taskType: "codebase",
			pending: map[string]int{"research": 1, "worldview": 2, "ingestion": 9},
			// spare = 8-1-2·3 = 1, shard floor = min(2, 7) = 2
			want: deny("codebase_cap reached (2)"),
		},
		{
			name:    "rule 1: under the derived cap",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, Shards: 2},
			running: []running{{"ingestion", "codebase"}, {"ingestion", "codebase"}},
			lane:    "ingestion", taskType: "codebase",
			pending: map[string]int{"ingestion": 9},
			want:    Decision{true, "admitted"},
		},
		{
			name:    "rule 2: maint best-effort cap with per_lane_min 0",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 0},
			running: []running{{"maint", "scheduled_job"}},
			lane:    "maint", taskType: "relevance_sweep",
			want: deny("maint best-effort cap (1)"),
		},
		{
			name:    "rule 2: maint cap follows per_lane_min",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 2},
			running: []running{{"maint", "scheduled_job"}, {"maint", "synthesize"}},
			lane:    "maint", taskType: "deploy_watch",
			want: deny("maint best-effort cap (2)"),
		},
		{
			name:    "rule 3: memory-gen pool cap",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, MemoryGenCap: 2},
			running: []running{{"research", "background_research"}, {"ingestion", "document"}},
			lane:    "extraction", taskType: "deep_extract",
			want: deny("memory-gen pool cap (2)"),
		},
		{
			name:    "rule 3: derived memory-gen cap wc - acquisition floor",
			cfg:     PolicyConfig{Workers: 4, Reserved: 0, PerLaneMin: 0, AcquisitionFloor: 2},
			running: []running{{"research", "background_research"}, {"ingestion", "document"}},
			lane:    "extraction", taskType: "deep_extract",
			want: deny("memory-gen pool cap (2)"),
		},
		{
			name:    "rule 3: content_url counts against acquisition",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, MemoryGenCap: 2},
			running: []running{{"research", "background_research"}, {"ingestion", "document"}},
			lane:    "ingestion", taskType: "content_url",
			pending: map[string]int{"ingestion": 1},
			want:    Decision{true, "admitted"},
		},
		{
			name:    "rule 4: reserve interactive",
			cfg:     PolicyConfig{Workers: 4, Reserved: 2, PerLaneMin: 1},
			running: []running{{"research", "background_research"}, {"connectors", "feed_sweep"}},
			lane:    "connectors", taskType: "connector_sync",
			pending: map[string]int{"connectors": 3},
			want:    deny("reserve interactive (2)"),
		},
		{
			name:    "rule 4: an interactive task is admitted where the floor holds",
			cfg:     PolicyConfig{Workers: 4, Reserved: 2, PerLaneMin: 1},
			running: []running{{"research", "background_research"}, {"connectors", "feed_sweep"}},
			lane:    "queries", taskType: "conversation",
			want: Decision{true, "admitted"},
		},
		{
			name: "rule 5: steer to uncovered lane",
			cfg:  PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1},
			lane: "ingestion", taskType: "document",
			pending: map[string]int{"research": 1, "ingestion": 5},
			running: []running{{"ingestion", "diff"}},
			want:    deny("steer to uncovered lane"),
		},
		{
			name: "rule 5: the uncovered lane itself is admitted",
			cfg:  PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1},
			lane: "research", taskType: "research_paper_fetch",
			pending: map[string]int{"research": 1, "ingestion": 5},
			want:    Decision{true, "admitted"},
		},
		{
			name: "rule 6: reserve hot spare",
			cfg:  PolicyConfig{Workers: 2, Reserved: 2, PerLaneMin: 1},
			lane: "ingestion", taskType: "document",
			want: deny("reserve hot spare"),
		},
		{
			name: "rule 6: one worker keeps its spare",
			cfg:  PolicyConfig{Workers: 1, Reserved: 1, PerLaneMin: 1},
			lane: "worldview", taskType: "feed_ingest",
			want: deny("reserve hot spare"),
		},
		{
			name: "rule 6: an uncovered lane may take the spare",
			cfg:  PolicyConfig{Workers: 2, Reserved: 2, PerLaneMin: 1},
			lane: "ingestion", taskType: "document",
			pending: map[string]int{"ingestion": 1},
			want:    Decision{true, "admitted"},
		},
		{
			name: "rule 7: unknown lane, empty registry",
			cfg:  PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1},
			lane: "nowhere", taskType: "mystery",
			want: Decision{true, "admitted"},
		},
		{
			name: "rule 7: lane without pending work",
			cfg:  PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1},
			lane: "enrichment", taskType: "enrichment_backfill",
			want: Decision{true, "admitted"},
		},
		// The two fixed reference defects for the interactive lane.
		{
			name:    "fixed: hot spare never refuses a second interactive task",
			cfg:     PolicyConfig{Workers: 2, Reserved: 1, PerLaneMin: 1},
			running: []running{{"queries", "conversation"}},
			lane:    "queries", taskType: "kg_memory",
			want: Decision{true, "admitted"},
		},
		{
			name:    "fixed: steering never refuses an interactive task",
			cfg:     PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1},
			running: []running{{"queries", "conversation"}},
			lane:    "queries", taskType: "conversation",
			pending: map[string]int{"research": 2, "connectors": 1},
			want:    Decision{true, "admitted"},
		},
		{
			name:    "fixed: second interactive task lands while the floor holds",
			cfg:     PolicyConfig{Workers: 4, Reserved: 2, PerLaneMin: 1},
			running: []running{{"queries", "conversation"}, {"research", "background_research"}, {"connectors", "feed_sweep"}},
			lane:    "queries", taskType: "conversation",
			pending: map[string]int{"research": 2, "maint": 1},
			want:    Decision{true, "admitted"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry()
			for i, r := range tc.running {
				reg.Start(fmt.Sprint("w", i), r.lane, r.taskType)
			}
			p := NewPolicy(tc.cfg, reg)
			if got := p.Decide(tc.lane, tc.taskType, tc.pending); got != tc.want {
				t.Errorf("Decide(%s, %s) = %+v, want %+v", tc.lane, tc.taskType, got, tc.want)
			}
		})
	}
}

func TestInteractiveTaskAlwaysAdmitted(t *testing.T) {
	// Whatever the registry and pending work, a queries task that reaches
	// Decide is admitted (rules 1–4 never fire for its types, 5 and 6 skip it).
	lanes := priority.LaneNames()
	for wc := 1; wc <= 4; wc++ {
		for reserved := 0; reserved <= 4; reserved++ {
			for busy := 0; busy <= wc; busy++ {
				reg := NewRegistry()
				for i := range busy {
					l := priority.Lanes()[i%len(lanes)]
					reg.Start(fmt.Sprint("w", i), l.Name, l.TaskTypes[0])
				}
				p := NewPolicy(PolicyConfig{Workers: wc, Reserved: reserved, PerLaneMin: 1}, reg)
				pending := map[string]int{"research": 1, "maint": 1, "ingestion": 3}
				for _, typ := range []string{"conversation", "kg_memory"} {
					if d := p.Decide("queries", typ, pending); !d.Admit {
						t.Errorf("wc=%d reserved=%d busy=%d: %s refused: %q", wc, reserved, busy, typ, d.Reason)
					}
				}
			}
		}
	}
}

func TestCodebaseCap(t *testing.T) {
	for _, tc := range []struct {
		cfg     PolicyConfig
		pending map[string]int
		want    int
	}{
		{PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, Shards: 4}, nil, 7},
		{PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, Shards: 4}, map[string]int{"research": 1, "maint": 1, "ingestion": 4, "queries": 0}, 5},
		{PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 4, Shards: 4}, map[string]int{"research": 1, "maint": 1}, 4},
		{PolicyConfig{Workers: 8, Reserved: 8, PerLaneMin: 4, Shards: 4}, map[string]int{"research": 1}, 1},
		{PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, CodebaseCap: 3}, nil, 3},
	} {
		if got := NewPolicy(tc.cfg, nil).CodebaseCap(tc.pending); got != tc.want {
			t.Errorf("CodebaseCap(%+v, %v) = %d, want %d", tc.cfg, tc.pending, got, tc.want)
		}
	}
}

func TestMemoryGenCap(t *testing.T) {
	for _, tc := range []struct {
		cfg  PolicyConfig
		want int
	}{
		{PolicyConfig{Workers: 8}, 6}, // floor max(1, 8/4) = 2
		{PolicyConfig{Workers: 1}, 1}, // max(1, 1-1)
		{PolicyConfig{Workers: 8, AcquisitionFloor: 3}, 5},
		{PolicyConfig{Workers: 8, MemoryGenCap: 20}, 8},
		{PolicyConfig{Workers: 8, MemoryGenCap: 2}, 2},
	} {
		if got := NewPolicy(tc.cfg, nil).MemoryGenCap(); got != tc.want {
			t.Errorf("MemoryGenCap(%+v) = %d, want %d", tc.cfg, got, tc.want)
		}
	}
}

func TestPolicyConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		env     map[string]string
		want    PolicyConfig
	}{
		{"defaults", 8, nil, PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, AcquisitionFloor: 2}},
		{"zero workers", 0, nil, PolicyConfig{Workers: 1, Reserved: 1, PerLaneMin: 1, AcquisitionFloor: 1}},
		{"trimmed values", 8, map[string]string{
			EnvReserved: " 2 ", EnvPerLaneMin: "\t0", EnvCodebaseCap: "3 ", EnvAcquisitionFloor: " 4", EnvMemoryGenCap: "5", EnvShards: "16",
		}, PolicyConfig{Workers: 8, Reserved: 2, PerLaneMin: 0, CodebaseCap: 3, AcquisitionFloor: 4, MemoryGenCap: 5, Shards: 16}},
		{"clamped", 4, map[string]string{
			EnvReserved: "9", EnvPerLaneMin: "-3", EnvCodebaseCap: "0", EnvAcquisitionFloor: "0", EnvMemoryGenCap: "99", EnvShards: "500",
		}, PolicyConfig{Workers: 4, Reserved: 4, PerLaneMin: 0, CodebaseCap: 1, AcquisitionFloor: 1, MemoryGenCap: 4, Shards: 64}},
		{"invalid values give defaults", 8, map[string]string{
			EnvReserved: "two", EnvPerLaneMin: "1.5", EnvCodebaseCap: "", EnvAcquisitionFloor: "x", EnvMemoryGenCap: "-", EnvShards: "many",
		}, PolicyConfig{Workers: 8, Reserved: 1, PerLaneMin: 1, AcquisitionFloor: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policyConfigFrom(tc.workers, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyConfigFromProcessEnv(t *testing.T) {
	t.Setenv(EnvReserved, "3")
	t.Setenv(EnvMemoryGenCap, "2")
	got := PolicyConfigFromEnv(6)
	if got.Reserved != 3 || got.MemoryGenCap != 2 || got.PerLaneMin != 1 {
		t.Errorf("PolicyConfigFromEnv(6) = %+v", got)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.Start("a", "ingestion", "document")
	r.Start("a", "ingestion", "content_url") // overwrites
	r.Start("b", "maint", "scheduled_job")
	r.Start("c", "queries", "conversation")
	r.Start("d", "research", "background_research")
	r.Finish("b")
	r.Finish("b")
	r.Finish("nobody")
	if got := r.Running(); got != 3 {
		t.Errorf("Running = %d, want 3", got)
	}
	if diff := cmp.Diff(map[string]int{"ingestion": 1, "queries": 1, "research": 1}, r.RunningByLane()); diff != "" {
		t.Errorf("RunningByLane (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"content_url": 1, "conversation": 1, "background_research": 1}, r.RunningByType()); diff != "" {
		t.Errorf("RunningByType (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"acquisition": 1, "memory_gen": 1}, r.RunningByPool()); diff != "" {
		t.Errorf("RunningByPool (-want +got):\n%s", diff)
	}
}

func TestAdmitRecordsOnlyAdmitted(t *testing.T) {
	p := NewPolicy(PolicyConfig{Workers: 2, Reserved: 2, PerLaneMin: 1}, nil)
	if d := p.admit("w0", "ingestion", "document", nil); d.Admit {
		t.Fatalf("admit = %+v, want hot-spare refusal", d)
	}
	if n := p.Registry().Running(); n != 0 {
		t.Fatalf("a refusal changed the registry: %d running", n)
	}
	if d := p.admit("w0", "queries", "conversation", nil); !d.Admit {
		t.Fatalf("admit = %+v", d)
	}
	if got := p.Registry().RunningByLane()["queries"]; got != 1 {
		t.Fatalf("admitted task not recorded")
	}
}

func FuzzPolicyConfigFromEnv(f *testing.F) {
	f.Add(4, " 2 ", "0", "3", "1", "9", "8")
	f.Add(0, "x", "-1", "", "99999999999999999999", "1.5", "-7")
	f.Fuzz(func(t *testing.T, workers int, reserved, perLane, codebase, acq, memGen, shards string) {
		env := map[string]string{EnvReserved: reserved, EnvPerLaneMin: perLane, EnvCodebaseCap: codebase,
			EnvAcquisitionFloor: acq, EnvMemoryGenCap: memGen, EnvShards: shards}
		c := policyConfigFrom(workers, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		wc := max(1, workers)
		in := func(v, lo, hi int) bool { return v >= lo && v <= hi }
		if c.Workers != wc || !in(c.Reserved, 0, wc) || !in(c.PerLaneMin, 0, wc) || !in(c.AcquisitionFloor, 1, wc) ||
			(c.CodebaseCap != 0 && !in(c.CodebaseCap, 1, wc)) || (c.MemoryGenCap != 0 && !in(c.MemoryGenCap, 1, wc)) ||
			(c.Shards != 0 && !in(c.Shards, 1, 64)) {
			t.Fatalf("config %+v out of bounds for wc=%d", c, wc)
		}
		p := NewPolicy(c, nil)
		if fl := p.InteractiveFloor(); fl < 0 || fl > wc-1 && wc > 1 {
			t.Fatalf("floor %d for wc=%d", fl, wc)
		}
	})
}

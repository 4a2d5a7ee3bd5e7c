package priority_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edictrt/edict/priority"
)

func TestLaneTable(t *testing.T) {
	want := []string{"queries", "ingestion", "connectors", "research", "worldview", "extraction", "enrichment", "maint"}
	if diff := cmp.Diff(want, priority.LaneNames()); diff != "" {
		t.Fatalf("lane order (-want +got):\n%s", diff)
	}
	tests := []struct {
		typ, lane, pool string
		class           priority.Class
	}{
		{"conversation", "queries", "", priority.Interactive},
		{"kg_memory", "queries", "", priority.Interactive},
		{"codebase", "ingestion", "memory_gen", priority.BackgroundIngestion},
		{"document", "ingestion", "memory_gen", priority.BackgroundIngestion},
		{"content_url", "ingestion", "acquisition", priority.BackgroundIngestion},
		{"diff", "ingestion", "memory_gen", priority.BackgroundIngestion},
		{"skill_workflows", "ingestion", "memory_gen", priority.Hydration},
		{"self_tool_surface", "ingestion", "memory_gen", priority.BackgroundIngestion},
		{"session_upload", "ingestion", "memory_gen", priority.BackgroundIngestion},
		{"connector_sync", "connectors", "acquisition", priority.BackgroundIngestion},
		{"feed_sweep", "connectors", "acquisition", priority.BackgroundIngestion},
		{"connector_drain", "connectors", "acquisition", priority.BackgroundIngestion},
		{"capability_hydration", "connectors", "acquisition", priority.Hydration},
		{"research_paper_fetch", "research", "memory_gen", priority.BackgroundIngestion},
		{"background_research", "research", "memory_gen", priority.BackgroundIngestion},
		{"cohort_synthesize", "research", "memory_gen", priority.BackgroundIngestion},
		{"feed_ingest", "worldview", "memory_gen", priority.BackgroundIngestion},
		{"deep_extract", "extraction", "memory_gen", priority.BackgroundIngestion},
		{"deep_analysis", "extraction", "memory_gen", priority.BackgroundIngestion},
		{"enrichment_backfill", "enrichment", "memory_gen", priority.BackgroundIngestion},
		{"scheduled_job", "maint", "", priority.BackgroundIngestion},
		{"relevance_sweep", "maint", "", priority.BackgroundIngestion},
		{"fleet_event_triage", "maint", "", priority.BackgroundIngestion},
		{"deploy_watch", "maint", "", priority.BackgroundIngestion},
		{"synthesize", "maint", "", priority.BackgroundIngestion},
		{"never_heard_of_it", "maint", "", priority.BackgroundIngestion},
		{"", "maint", "", priority.BackgroundIngestion},
	}
	for _, tt := range tests {
		lane := priority.LaneOf(tt.typ)
		if lane != tt.lane {
			t.Errorf("LaneOf(%q) = %q, want %q", tt.typ, lane, tt.lane)
		}
		if got := priority.ForTaskType(tt.typ); got != tt.class {
			t.Errorf("ForTaskType(%q) = %v, want %v", tt.typ, got, tt.class)
		}
		if got := priority.PoolOf(lane, tt.typ); got != tt.pool {
			t.Errorf("PoolOf(%q, %q) = %q, want %q", lane, tt.typ, got, tt.pool)
		}
	}
	roles := map[string]struct {
		role    string
		timeout time.Duration
	}{
		"queries": {"generator", 120 * time.Second}, "ingestion": {"lite", 3600 * time.Second},
		"connectors": {"lite", 180 * time.Second}, "research": {"learner", 1800 * time.Second},
		"worldview": {"lite", 300 * time.Second}, "extraction": {"learner", 1800 * time.Second},
		"enrichment": {"lite", 300 * time.Second}, "maint": {"judge", 600 * time.Second},
	}
	for _, l := range priority.Lanes() {
		r := roles[l.Name]
		if l.ModelRole != r.role || priority.ModelRole(l.Name) != r.role {
			t.Errorf("lane %s model role = %q, want %q", l.Name, l.ModelRole, r.role)
		}
		if l.SoftTimeout != r.timeout || priority.SoftTimeout(l.Name) != r.timeout {
			t.Errorf("lane %s soft timeout = %v, want %v", l.Name, l.SoftTimeout, r.timeout)
		}
		if l.BestEffort != (l.Name == "maint") {
			t.Errorf("lane %s best-effort = %v", l.Name, l.BestEffort)
		}
		if want := priority.ForLane(l.Name); l.Class != want {
			t.Errorf("lane %s class = %v, ForLane = %v", l.Name, l.Class, want)
		}
	}
	if got := priority.SoftTimeout("nope"); got != 1800*time.Second {
		t.Errorf("unknown lane soft timeout = %v", got)
	}
	for _, lane := range []string{"", "nope", "ingestion", "maint"} {
		if got := priority.ForLane(lane); got != priority.BackgroundIngestion {
			t.Errorf("ForLane(%q) = %v", lane, got)
		}
	}
	if got := priority.ForLane("queries"); got != priority.Interactive {
		t.Errorf("ForLane(queries) = %v", got)
	}
	if l, ok := priority.LaneInfo("connectors"); !ok || l.Pool != "acquisition" {
		t.Errorf("LaneInfo(connectors) = %+v, %v", l, ok)
	}
	if _, ok := priority.LaneInfo("nope"); ok {
		t.Error("LaneInfo(nope) found a lane")
	}
	// Lanes returns a copy: mutating it does not change the table.
	ls := priority.Lanes()
	ls[0].TaskTypes[0] = "mutated"
	if priority.LaneOf("conversation") != "queries" || priority.Lanes()[0].TaskTypes[0] != "conversation" {
		t.Error("Lanes() exposed the table")
	}
}

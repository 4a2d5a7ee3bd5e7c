package priority

import "time"

// Lane names, in table order.
const (
	LaneQueries    = "queries"
	LaneIngestion  = "ingestion"
	LaneConnectors = "connectors"
	LaneResearch   = "research"
	LaneWorldview  = "worldview"
	LaneExtraction = "extraction"
	LaneEnrichment = "enrichment"
	LaneMaint      = "maint"
)

// DefaultLane is the lane of a task type the table does not list.
const DefaultLane = LaneMaint

// Worker pools a lane's (or a task type's) work counts against.
const (
	PoolNone        = ""
	PoolMemoryGen   = "memory_gen"
	PoolAcquisition = "acquisition"
)

// Model roles a lane's work uses.
const (
	RoleGenerator = "generator"
	RoleLite      = "lite"
	RoleLearner   = "learner"
	RoleJudge     = "judge"
)

// UnknownLaneTimeout is the soft timeout of a lane the table does not list.
const UnknownLaneTimeout = 1800 * time.Second

// Lane describes one lane of the taxonomy.
type Lane struct {
	// Name is the lane's name, e.g. "queries".
	Name string
	// Class is the class of the lane's work (Interactive only for queries).
	Class Class
	// TaskTypes lists the task types that run in the lane.
	TaskTypes []string
	// ModelRole is the LLM role the lane's work uses.
	ModelRole string
	// Pool is the worker pool the lane counts against ("" for none).
	Pool string
	// SoftTimeout bounds one task of the lane.
	SoftTimeout time.Duration
	// BestEffort reports whether the lane is best-effort (only maint).
	BestEffort bool
}

var lanes = [...]Lane{
	{LaneQueries, Interactive, []string{"conversation", "kg_memory"}, RoleGenerator, PoolNone, 120 * time.Second, false},
	{LaneIngestion, BackgroundIngestion, []string{"codebase", "document", "content_url", "diff", "skill_workflows", "self_tool_surface", "session_upload"}, RoleLite, PoolMemoryGen, 3600 * time.Second, false},
	{LaneConnectors, BackgroundIngestion, []string{"connector_sync", "feed_sweep", "connector_drain", "capability_hydration"}, RoleLite, PoolAcquisition, 180 * time.Second, false},
	{LaneResearch, BackgroundIngestion, []string{"research_paper_fetch", "background_research", "cohort_synthesize"}, RoleLearner, PoolMemoryGen, 1800 * time.Second, false},
	{LaneWorldview, BackgroundIngestion, []string{"feed_ingest"}, RoleLite, PoolMemoryGen, 300 * time.Second, false},
	{LaneExtraction, BackgroundIngestion, []string{"deep_extract", "deep_analysis"}, RoleLearner, PoolMemoryGen, 1800 * time.Second, false},
	{LaneEnrichment, BackgroundIngestion, []string{"enrichment_backfill"}, RoleLite, PoolMemoryGen, 300 * time.Second, false},
	{LaneMaint, BackgroundIngestion, []string{"scheduled_job", "relevance_sweep", "fleet_event_triage", "deploy_watch", "synthesize"}, RoleJudge, PoolNone, 600 * time.Second, true},
}

// HydrationTypes are the task types that run as Hydration (high) although
// their lanes are background.
var HydrationTypes = [...]string{"capability_hydration", "skill_workflows"}

// poolOverride lists task types whose pool differs from their lane's.
var poolOverride = map[string]string{"content_url": PoolAcquisition}

var laneByType = func() map[string]int {
	m := make(map[string]int)
	for i, l := range lanes {
		for _, t := range l.TaskTypes {
			m[t] = i
		}
	}
	return m
}()

// Lanes returns the lane table in order. The result is a copy.
func Lanes() []Lane {
	out := make([]Lane, len(lanes))
	for i, l := range lanes {
		l.TaskTypes = append([]string(nil), l.TaskTypes...)
		out[i] = l
	}
	return out
}

// LaneNames returns the lane names in table order.
func LaneNames() []string {
	out := make([]string, len(lanes))
	for i, l := range lanes {
		out[i] = l.Name
	}
	return out
}

// LaneInfo returns the named lane and whether the table lists it.
func LaneInfo(name string) (Lane, bool) {
	for _, l := range lanes {
		if l.Name == name {
			l.TaskTypes = append([]string(nil), l.TaskTypes...)
			return l, true
		}
	}
	return Lane{}, false
}

// LaneOf returns the lane of a task type; an unknown type is in [DefaultLane].
func LaneOf(taskType string) string {
	if i, ok := laneByType[taskType]; ok {
		return lanes[i].Name
	}
	return DefaultLane
}

// ForLane returns the class of a lane's work: Interactive for queries,
// BackgroundIngestion for every other lane, an unknown lane and no lane.
func ForLane(lane string) Class {
	if lane == LaneQueries {
		return Interactive
	}
	return BackgroundIngestion
}

// IsHydration reports whether taskType is one of [HydrationTypes].
func IsHydration(taskType string) bool {
	return taskType == HydrationTypes[0] || taskType == HydrationTypes[1]
}

// ForTaskType returns the class a task of this type runs as: Hydration for
// the hydration types, otherwise the class of its lane.
func ForTaskType(taskType string) Class {
	if IsHydration(taskType) {
		return Hydration
	}
	return ForLane(LaneOf(taskType))
}

// PoolOf returns the worker pool a task of this type in lane counts against:
// the type's override (content_url counts against acquisition), else the
// lane's pool, else "" (queries, maint and unknown lanes are unpooled).
func PoolOf(lane, taskType string) string {
	if p, ok := poolOverride[taskType]; ok {
		return p
	}
	for _, l := range lanes {
		if l.Name == lane {
			return l.Pool
		}
	}
	return PoolNone
}

// SoftTimeout returns the soft timeout of one task in lane;
// [UnknownLaneTimeout] for a lane the table does not list.
func SoftTimeout(lane string) time.Duration {
	for _, l := range lanes {
		if l.Name == lane {
			return l.SoftTimeout
		}
	}
	return UnknownLaneTimeout
}

// ModelRole returns the model role of lane's work, "" for an unknown lane.
func ModelRole(lane string) string {
	for _, l := range lanes {
		if l.Name == lane {
			return l.ModelRole
		}
	}
	return ""
}

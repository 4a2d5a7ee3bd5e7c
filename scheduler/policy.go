package scheduler

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/edictrt/edict/priority"
)

// PolicyConfig configures a [Policy]. The zero value of each field is its
// documented default, except Reserved and PerLaneMin, which are taken as
// given (0 is a meaningful setting for both; [PolicyConfigFromEnv] gives
// them their defaults of 1).
type PolicyConfig struct {
	// Workers is the worker count wc. Zero means 1.
	Workers int
	// Reserved is the number of workers kept for interactive work (the hot
	// spare and the interactive floor). Taken as given; negative means 0.
	Reserved int
	// PerLaneMin is the number of running tasks that makes a lane covered,
	// and (at least 1) the maint lane's best-effort cap. Taken as given;
	// negative means 0.
	PerLaneMin int
	// CodebaseCap caps running codebase tasks. Zero means unset: the cap is
	// derived from the pending work (see [Policy.CodebaseCap]).
	CodebaseCap int
	// MemoryGenCap caps running tasks of the memory_gen pool. Zero means
	// unset: wc − max(1, AcquisitionFloor), at least 1.
	MemoryGenCap int
	// AcquisitionFloor is the number of workers the acquisition pool keeps
	// out of memory_gen's reach. Zero means max(1, wc/4).
	AcquisitionFloor int
	// Shards is K, the number of durable shard writers, bounding the
	// derived codebase cap. Zero means clamp(cpus/2, 1, 8).
	Shards int
}

// Environment variables read by [PolicyConfigFromEnv].
const (
	EnvReserved         = "EDICT_SCHED_RESERVED"
	EnvPerLaneMin       = "EDICT_SCHED_PER_LANE_MIN"
	EnvCodebaseCap      = "EDICT_SCHED_CODEBASE_CAP"
	EnvAcquisitionFloor = "EDICT_POOL_ACQUISITION_FLOOR"
	EnvMemoryGenCap     = "EDICT_POOL_MEMORY_GEN_CAP"
	EnvShards           = "EDICT_SHARDS"
)

// PolicyConfigFromEnv returns the configuration for workers workers from
// the environment. With wc = max(1, workers): EDICT_SCHED_RESERVED and
// EDICT_SCHED_PER_LANE_MIN default to 1 and are clamped to [0, wc];
// EDICT_SCHED_CODEBASE_CAP and EDICT_POOL_MEMORY_GEN_CAP are unset unless
// given, then clamped to [1, wc]; EDICT_POOL_ACQUISITION_FLOOR defaults to
// max(1, wc/4) and is clamped to [1, wc]; EDICT_SHARDS, when given, is
// clamped to [1, 64]. Values are trimmed of spaces; an invalid integer gives
// the default.
func PolicyConfigFromEnv(workers int) PolicyConfig {
	return policyConfigFrom(workers, os.LookupEnv)
}

func policyConfigFrom(workers int, lookup func(string) (string, bool)) PolicyConfig {
	wc := max(1, workers)
	get := func(name string) (int, bool) {
		v, ok := lookup(name)
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil
	}
	clamp := func(n, lo, hi int) int { return min(max(n, lo), hi) }
	cfg := PolicyConfig{Workers: wc, Reserved: 1, PerLaneMin: 1, AcquisitionFloor: max(1, wc/4)}
	if n, ok := get(EnvReserved); ok {
		cfg.Reserved = clamp(n, 0, wc)
	}
	cfg.Reserved = min(cfg.Reserved, wc)
	if n, ok := get(EnvPerLaneMin); ok {
		cfg.PerLaneMin = clamp(n, 0, wc)
	}
	cfg.PerLaneMin = min(cfg.PerLaneMin, wc)
	if n, ok := get(EnvCodebaseCap); ok {
		cfg.CodebaseCap = clamp(n, 1, wc)
	}
	if n, ok := get(EnvAcquisitionFloor); ok {
		cfg.AcquisitionFloor = clamp(n, 1, wc)
	}
	if n, ok := get(EnvMemoryGenCap); ok {
		cfg.MemoryGenCap = clamp(n, 1, wc)
	}
	if n, ok := get(EnvShards); ok {
		cfg.Shards = clamp(n, 1, 64)
	}
	return cfg
}

// Decision is the outcome of [Policy.Decide].
type Decision struct {
	// Admit reports whether the task may run.
	Admit bool
	// Reason is "admitted" or the exact reason of the first rule that
	// refused the task.
	Reason string
}

// Reason strings of [Decision] without a number.
const (
	ReasonAdmitted = "admitted"
	ReasonSteer    = "steer to uncovered lane"
	ReasonHotSpare = "reserve hot spare"
)

// Policy is the worker admission policy (the reference's AdmissionPolicy):
// it keeps an interactive floor of workers that non-interactive lanes can
// never claim, caps codebase, maint and memory_gen work, and steers workers
// to lanes with pending work and no running task. It is advisory: the
// engine's claim is authoritative. A Policy is safe for concurrent use.
type Policy struct {
	wc, reserved, perLaneMin int
	codebaseCap, memGenCap   int
	acqFloor                 int
	shards                   atomic.Int64
	reg                      *Registry
}

// NewPolicy returns a policy over reg (a new registry when nil).
func NewPolicy(cfg PolicyConfig, reg *Registry) *Policy {
	if reg == nil {
		reg = NewRegistry()
	}
	wc := max(1, cfg.Workers)
	p := &Policy{
		wc:          wc,
		reserved:    max(0, cfg.Reserved),
		perLaneMin:  max(0, cfg.PerLaneMin),
		codebaseCap: max(0, cfg.CodebaseCap),
		memGenCap:   max(0, cfg.MemoryGenCap),
		acqFloor:    cfg.AcquisitionFloor,
		reg:         reg,
	}
	if p.acqFloor <= 0 {
		p.acqFloor = max(1, wc/4)
	}
	p.SetShards(cfg.Shards)
	return p
}

// SetShards sets K, the engine's number of durable shard writers, once it
// is known; k ≤ 0 restores the default clamp(cpus/2, 1, 8).
func (p *Policy) SetShards(k int) {
	if k <= 0 {
		k = min(max(runtime.NumCPU()/2, 1), 8)
	}
	p.shards.Store(int64(min(k, 64)))
}

// Registry returns the registry the policy reads.
func (p *Policy) Registry() *Registry { return p.reg }

// Workers returns the worker count wc.
func (p *Policy) Workers() int { return p.wc }

// InteractiveFloor returns min(max(1, reserved), wc−1): the number of
// workers non-interactive lanes can never claim. It is never relaxed.
func (p *Policy) InteractiveFloor() int {
	return min(max(1, p.reserved), max(0, p.wc-1))
}

// CodebaseCap returns the cap on running codebase tasks for the given
// pending work: the configured cap when set; otherwise
// max(1, wc − reserved − L·per_lane_min, min(K, max(1, wc − reserved))),
// where L counts lanes other than ingestion with pending work.
func (p *Policy) CodebaseCap(pendingByLane map[string]int) int {
	if p.codebaseCap > 0 {
		return p.codebaseCap
	}
	others := 0
	for lane, n := range pendingByLane {
		if lane != priority.LaneIngestion && n > 0 {
			others++
		}
	}
	spare := p.wc - p.reserved - others*p.perLaneMin
	shardFloor := min(int(p.shards.Load()), max(1, p.wc-p.reserved))
	return max(1, spare, shardFloor)
}

// MemoryGenCap returns the cap on running tasks of the memory_gen pool.
func (p *Policy) MemoryGenCap() int {
	if p.memGenCap > 0 {
		return max(1, min(p.memGenCap, p.wc))
	}
	return max(1, p.wc-max(1, p.acqFloor))
}

// Decide decides whether a task of taskType in lane may start now, given
// the ready items per lane. The rules run in order and the first refusal
// wins:
//
//  1. codebase and running codebase ≥ the codebase cap: "codebase_cap reached (N)"
//  2. a best-effort lane (maint) and its running ≥ max(1, per_lane_min): "maint best-effort cap (N)"
//  3. the memory_gen pool and its running ≥ its cap: "memory-gen pool cap (N)"
//  4. a non-interactive lane and free−1 < the interactive floor (when > 0): "reserve interactive (N)"
//  5. some lanes have pending work and no coverage, and lane is not one of them: "steer to uncovered lane"
//  6. free−1 < reserved and lane is not uncovered: "reserve hot spare"
//  7. otherwise "admitted"
//
// free is wc minus the busy workers. Rules 5 and 6 never refuse a task of
// the interactive lane (queries), so an interactive task is always admitted.
func (p *Policy) Decide(lane, taskType string, pendingByLane map[string]int) Decision {
	p.reg.mu.Lock()
	s := p.reg.snapshotLocked()
	p.reg.mu.Unlock()
	return p.decide(s, lane, taskType, pendingByLane)
}

// admit decides and, when admitted, records the start in the registry
// under one lock, so concurrent workers cannot both take the last slot.
func (p *Policy) admit(workerID, lane, taskType string, pendingByLane map[string]int) Decision {
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	d := p.decide(p.reg.snapshotLocked(), lane, taskType, pendingByLane)
	if d.Admit {
		p.reg.running[workerID] = registryEntry{lane, taskType}
	}
	return d
}

func (p *Policy) decide(s registrySnapshot, lane, taskType string, pending map[string]int) Decision {
	free := max(0, p.wc-s.busy)
	if taskType == "codebase" {
		if c := p.CodebaseCap(pending); s.byType["codebase"] >= c {
			return deny(fmt.Sprintf("codebase_cap reached (%d)", c))
		}
	}
	if info, ok := priority.LaneInfo(lane); ok && info.BestEffort {
		if c := max(1, p.perLaneMin); s.byLane[lane] >= c {
			return deny(fmt.Sprintf("maint best-effort cap (%d)", c))
		}
	}
	if priority.PoolOf(lane, taskType) == priority.PoolMemoryGen {
		if c := p.MemoryGenCap(); s.byPool[priority.PoolMemoryGen] >= c {
			return deny(fmt.Sprintf("memory-gen pool cap (%d)", c))
		}
	}
	interactive := priority.ForLane(lane) == priority.Interactive
	if floor := p.InteractiveFloor(); !interactive && floor > 0 && free-1 < floor {
		return deny(fmt.Sprintf("reserve interactive (%d)", floor))
	}
	if interactive {
		// Fixed reference defect: the spare exists for interactive work.
		return Decision{Admit: true, Reason: ReasonAdmitted}
	}
	covered := max(1, p.perLaneMin)
	anyUncovered, laneUncovered := false, false
	for _, l := range priority.LaneNames() {
		if pending[l] > 0 && s.byLane[l] < covered {
			anyUncovered = true
			if l == lane {
				laneUncovered = true
			}
		}
	}
	if anyUncovered && !laneUncovered {
		return deny(ReasonSteer)
	}
	if free-1 < p.reserved && !laneUncovered {
		return deny(ReasonHotSpare)
	}
	return Decision{Admit: true, Reason: ReasonAdmitted}
}

func deny(reason string) Decision { return Decision{Reason: reason} }

package scheduler

import (
	"sync"

	"github.com/edictrt/edict/priority"
)

// Registry records which task each worker is running, for [Policy.Decide].
// It is safe for concurrent use; the zero value is not usable, use
// [NewRegistry].
type Registry struct {
	mu      sync.Mutex
	running map[string]registryEntry
}

type registryEntry struct{ lane, taskType string }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{running: make(map[string]registryEntry)}
}

// Start records that workerID runs a task of taskType in lane, replacing
// any entry the worker had.
func (r *Registry) Start(workerID, lane, taskType string) {
	r.mu.Lock()
	r.running[workerID] = registryEntry{lane, taskType}
	r.mu.Unlock()
}

// Finish records that workerID is idle. It is idempotent.
func (r *Registry) Finish(workerID string) {
	r.mu.Lock()
	delete(r.running, workerID)
	r.mu.Unlock()
}

// Running returns the number of busy workers.
func (r *Registry) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// RunningByLane returns the number of running tasks per lane.
func (r *Registry) RunningByLane() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked().byLane
}

// RunningByType returns the number of running tasks per task type.
func (r *Registry) RunningByType() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked().byType
}

// RunningByPool returns the number of running tasks per worker pool
// ([priority.PoolMemoryGen], [priority.PoolAcquisition]); unpooled lanes
// (queries, maint) are not counted.
func (r *Registry) RunningByPool() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked().byPool
}

// registrySnapshot is one consistent view of the registry.
type registrySnapshot struct {
	busy                   int
	byLane, byType, byPool map[string]int
}

func (r *Registry) snapshotLocked() registrySnapshot {
	s := registrySnapshot{
		busy:   len(r.running),
		byLane: make(map[string]int),
		byType: make(map[string]int),
		byPool: make(map[string]int),
	}
	for _, e := range r.running {
		s.byLane[e.lane]++
		s.byType[e.taskType]++
		if p := priority.PoolOf(e.lane, e.taskType); p != priority.PoolNone {
			s.byPool[p]++
		}
	}
	return s
}

package admission

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/edictrt/edict/priority"
)

// Reason is why QoS shed a request; the values are the metric label reason.
type Reason string

// QoS reasons, and ReasonCapacity for the baseline gate.
const (
	ReasonQuota        Reason = "quota"
	ReasonBackpressure Reason = "backpressure"
	ReasonFairShare    Reason = "fair_share"
	ReasonRateLimited  Reason = "rate_limited"
	ReasonCapacity     Reason = "capacity"
)

// Text returns the reason's 503 text; every text starts with "BUSY:".
func (r Reason) Text() string {
	switch r {
	case ReasonQuota:
		return "BUSY: QoS per-principal quota exhausted, retry with backoff"
	case ReasonFairShare:
		return "BUSY: QoS principal fair-share reached under contention, retry with backoff"
	case ReasonBackpressure:
		return "BUSY: QoS capacity reserved for higher priority, retry with backoff"
	case ReasonRateLimited:
		return "BUSY: QoS per-principal rate limit for this class reached, retry with backoff"
	}
	return "BUSY: server at capacity, retry with backoff"
}

// QoSLimits are the derived QoS values (engine spec §4).
type QoSLimits struct {
	Capacity int
	Quota    int
	// Ceilings is indexed by priority.Class.Order(): Interactive,
	// Orchestration, Hydration, BackgroundIngestion.
	Ceilings [4]int
	Pressure int
	Bucket   int
	Refill   float64
}

// Limits returns the derived values for cfg when max_in_flight is
// maxInFlight.
func (cfg QoSConfig) Limits(maxInFlight int) QoSLimits {
	capacity := max(maxInFlight, 1)
	if cfg.Capacity > 0 {
		capacity = min(cfg.Capacity, capacity)
	}
	r := max(capacity/8, 1)
	quota := max(capacity/4, 1)
	if cfg.PrincipalQuota > 0 {
		quota = min(cfg.PrincipalQuota, capacity)
	}
	sub := func(n int) int { return max(capacity-n, 0) }
	return QoSLimits{
		Capacity: capacity,
		Quota:    quota,
		Ceilings: [4]int{capacity, sub(r), sub(2 * r), sub(3 * r)},
		Pressure: sub(3 * r),
		Bucket:   max(capacity/4, 4),
		Refill:   float64(capacity),
	}
}

type bucketKey struct {
	principal string
	class     priority.Class
}

// QoS is the opt-in QoS admission layer: a single-owner state machine behind
// a mutex, driven with the time supplied by the caller.
type QoS struct {
	lim QoSLimits

	mu           sync.Mutex
	inFlight     int
	perClass     [4]int
	perPrincipal map[string]int
	buckets      map[bucketKey]*rate.Limiter
}

// NewQoS returns the QoS layer for cfg (Enabled is not consulted: the caller
// decides whether to build one) with max_in_flight maxInFlight.
func NewQoS(cfg QoSConfig, maxInFlight int) *QoS {
	return &QoS{
		lim:          cfg.Limits(maxInFlight),
		perPrincipal: map[string]int{},
		buckets:      map[bucketKey]*rate.Limiter{},
	}
}

// Limits returns the derived values in use.
func (q *QoS) Limits() QoSLimits { return q.lim }

// QoSPermit is a QoS admission; Release gives it back (only the first call
// has an effect).
type QoSPermit struct {
	q         *QoS
	class     priority.Class
	principal string
	once      sync.Once
}

// TryAdmit runs the QoS checks in order — per-principal quota, class
// ceiling, fair share under pressure, the (principal, class) token bucket —
// and admits or returns the first failing check's reason. now drives the
// token bucket.
func (q *QoS) TryAdmit(class priority.Class, principal string, now time.Time) (*QoSPermit, Reason) {
	if !class.Valid() {
		class = priority.Orchestration
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	held, present := q.perPrincipal[principal]
	if held >= q.lim.Quota {
		return nil, ReasonQuota
	}
	if q.inFlight >= q.lim.Ceilings[class.Order()] {
		return nil, ReasonBackpressure
	}
	if class != priority.Interactive && q.inFlight >= q.lim.Pressure {
		active := max(len(q.perPrincipal), 1)
		if !present {
			active = len(q.perPrincipal) + 1
		}
		fair := max(q.lim.Capacity/active, 1)
		if held >= fair {
			return nil, ReasonFairShare
		}
	}
	if q.lim.Refill > 0 && q.lim.Capacity > 0 {
		k := bucketKey{principal, class}
		b := q.buckets[k]
		if b == nil {
			b = rate.NewLimiter(rate.Limit(q.lim.Refill), q.lim.Bucket)
			q.buckets[k] = b
		}
		if !b.AllowN(now, 1) {
			return nil, ReasonRateLimited
		}
	}
	q.inFlight++
	q.perClass[class.Order()]++
	q.perPrincipal[principal] = held + 1
	return &QoSPermit{q: q, class: class, principal: principal}, ""
}

// Release gives the permit back; when its principal holds no more permits,
// the principal's entry and all four of its buckets go.
func (p *QoSPermit) Release() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		q := p.q
		q.mu.Lock()
		defer q.mu.Unlock()
		q.inFlight--
		q.perClass[p.class.Order()]--
		if n := q.perPrincipal[p.principal] - 1; n > 0 {
			q.perPrincipal[p.principal] = n
			return
		}
		delete(q.perPrincipal, p.principal)
		for _, c := range priority.All {
			delete(q.buckets, bucketKey{p.principal, c})
		}
	})
}

// Class returns the class the permit was admitted as.
func (p *QoSPermit) Class() priority.Class { return p.class }

// QoSState is a snapshot of the QoS counters.
type QoSState struct {
	InFlight   int
	PerClass   map[priority.Class]int
	Principals int
	Buckets    int
}

// State returns a snapshot of the counters.
func (q *QoS) State() QoSState {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := QoSState{InFlight: q.inFlight, PerClass: map[priority.Class]int{}, Principals: len(q.perPrincipal), Buckets: len(q.buckets)}
	for _, c := range priority.All {
		s.PerClass[c] = q.perClass[c.Order()]
	}
	return s
}

// Pending is one request waiting to be planned by [PlanAdmissions].
type Pending struct {
	Class priority.Class
	// Deadline is the request's deadline; the zero time means none.
	Deadline time.Time
}

// PlanAdmissions returns the indexes of the pending requests to admit when
// available slots are free: ordered by class (highest first), then deadline
// (earliest first, none last), then arrival (index) order, truncated to
// available.
func PlanAdmissions(pending []Pending, available int) []int {
	idx := make([]int, len(pending))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		pa, pb := pending[a], pending[b]
		if c := cmp.Compare(order(pa.Class), order(pb.Class)); c != 0 {
			return c
		}
		switch {
		case pa.Deadline.IsZero() && pb.Deadline.IsZero():
		case pa.Deadline.IsZero():
			return 1
		case pb.Deadline.IsZero():
			return -1
		default:
			if c := pa.Deadline.Compare(pb.Deadline); c != 0 {
				return c
			}
		}
		return cmp.Compare(a, b)
	})
	return idx[:min(max(available, 0), len(idx))]
}

func order(c priority.Class) int {
	if !c.Valid() {
		return priority.Orchestration.Order()
	}
	return c.Order()
}

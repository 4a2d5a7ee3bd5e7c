package admission_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/priority"
)

func TestQoSLimitsWorkedValues(t *testing.T) {
	tests := []struct {
		capacity int
		want     admission.QoSLimits
	}{
		{8, admission.QoSLimits{8, 2, [4]int{8, 7, 6, 5}, 5, 4, 8}},
		{16, admission.QoSLimits{16, 4, [4]int{16, 14, 12, 10}, 10, 4, 16}},
		{32, admission.QoSLimits{32, 8, [4]int{32, 28, 24, 20}, 20, 8, 32}},
		{384, admission.QoSLimits{384, 96, [4]int{384, 336, 288, 240}, 240, 96, 384}},
		{2, admission.QoSLimits{2, 1, [4]int{2, 1, 0, 0}, 0, 4, 2}},
	}
	for _, tt := range tests {
		if got := (admission.QoSConfig{}).Limits(tt.capacity); got != tt.want {
			t.Errorf("Limits(%d) = %+v, want %+v", tt.capacity, got, tt.want)
		}
	}
	// Explicit values are bounded by max_in_flight and capacity.
	got := admission.QoSConfig{Capacity: 1000, PrincipalQuota: 1000}.Limits(64)
	if got.Capacity != 64 || got.Quota != 64 {
		t.Errorf("explicit bounds: %+v", got)
	}
}

func TestReasonTexts(t *testing.T) {
	tests := map[admission.Reason]string{
		admission.ReasonQuota:        "BUSY: QoS per-principal quota exhausted, retry with backoff",
		admission.ReasonFairShare:    "BUSY: QoS principal fair-share reached under contention, retry with backoff",
		admission.ReasonBackpressure: "BUSY: QoS capacity reserved for higher priority, retry with backoff",
		admission.ReasonRateLimited:  "BUSY: QoS per-principal rate limit for this class reached, retry with backoff",
		admission.ReasonCapacity:     "BUSY: server at capacity, retry with backoff",
	}
	for r, want := range tests {
		if got := r.Text(); got != want {
			t.Errorf("%s.Text() = %q, want %q", r, got, want)
		}
	}
}

func TestQoSChecksInOrder(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		class     priority.Class
		principal string
		want      admission.Reason // "" = admitted
	}
	tests := []struct {
		name  string
		cfg   admission.QoSConfig
		max   int
		tick  bool // advance one second per step, refilling the buckets
		steps []step
	}{
		{
			name: "quota applies to any class",
			max:  8, // quota 2
			steps: []step{
				{priority.Interactive, "a", ""},
				{priority.Interactive, "a", ""},
				{priority.Interactive, "a", admission.ReasonQuota},
				{priority.BackgroundIngestion, "a", admission.ReasonQuota},
				{priority.Interactive, "b", ""},
			},
		},
		{
			name: "lowest class shed first",
			cfg:  admission.QoSConfig{PrincipalQuota: 8},
			tick: true,
			max:  8, // ceilings 8/7/6/5, pressure 5, bucket 4
			steps: []step{
				{priority.BackgroundIngestion, "a", ""},
				{priority.BackgroundIngestion, "b", ""},
				{priority.BackgroundIngestion, "c", ""},
				{priority.BackgroundIngestion, "d", ""},
				{priority.BackgroundIngestion, "e", ""},
				{priority.BackgroundIngestion, "f", admission.ReasonBackpressure}, // in_flight 5 >= 5
				{priority.Hydration, "g", ""},
				{priority.Hydration, "h", admission.ReasonBackpressure},
				{priority.Orchestration, "i", ""},
				{priority.Orchestration, "j", admission.ReasonBackpressure},
				{priority.Interactive, "k", ""},
				{priority.Interactive, "l", admission.ReasonBackpressure}, // in_flight 8 >= 8
			},
		},
		{
			name: "fair share under pressure",
			cfg:  admission.QoSConfig{PrincipalQuota: 8},
			max:  8, // pressure 5
			tick: true,
			steps: []step{
				{priority.Interactive, "a", ""},
				{priority.Interactive, "a", ""},
				{priority.Interactive, "a", ""},
				{priority.Interactive, "a", ""},
				{priority.Interactive, "b", ""},
				// in_flight 5 >= pressure: active 2 (a present), fair 4, a holds 4
				{priority.Orchestration, "a", admission.ReasonFairShare},
				// b holds 1 < 4
				{priority.Orchestration, "b", ""},
				// interactive skips fair share: a holds 4 >= fair 4
				{priority.Interactive, "a", ""},
			},
		},
		{
			name: "token bucket per principal and class",
			cfg:  admission.QoSConfig{PrincipalQuota: 64},
			max:  64, // bucket 16
			steps: func() []step {
				var s []step
				for range 16 {
					s = append(s, step{priority.Interactive, "a", ""})
				}
				s = append(s, step{priority.Interactive, "a", admission.ReasonRateLimited})
				s = append(s, step{priority.Orchestration, "a", ""}) // a separate bucket
				s = append(s, step{priority.Interactive, "b", ""})
				return s
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := admission.NewQoS(tt.cfg, tt.max)
			for i, s := range tt.steps {
				now := t0
				if tt.tick {
					now = t0.Add(time.Duration(i) * time.Second)
				}
				p, r := q.TryAdmit(s.class, s.principal, now)
				if r != s.want {
					t.Fatalf("step %d (%v %s): reason %q, want %q", i, s.class, s.principal, r, s.want)
				}
				if (p != nil) != (s.want == "") {
					t.Fatalf("step %d: permit %v with reason %q", i, p, r)
				}
			}
		})
	}
}

func TestQoSBucketRefillsAndReleaseForgets(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	q := admission.NewQoS(admission.QoSConfig{PrincipalQuota: 64}, 64) // bucket 16, refill 64/s
	var held []*admission.QoSPermit
	for range 16 {
		p, r := q.TryAdmit(priority.Hydration, "w", t0)
		if r != "" {
			t.Fatalf("admit: %s", r)
		}
		held = append(held, p)
	}
	if _, r := q.TryAdmit(priority.Hydration, "w", t0); r != admission.ReasonRateLimited {
		t.Fatalf("bucket empty: reason %q", r)
	}
	// 1/64 s later one token is back.
	p, r := q.TryAdmit(priority.Hydration, "w", t0.Add(time.Second/64))
	if r != "" {
		t.Fatalf("after refill: reason %q", r)
	}
	held = append(held, p)
	if st := q.State(); st.InFlight != 17 || st.PerClass[priority.Hydration] != 17 || st.Principals != 1 || st.Buckets != 1 {
		t.Fatalf("state = %+v", st)
	}
	for _, p := range held {
		p.Release()
		p.Release()
	}
	if st := q.State(); st.InFlight != 0 || st.Principals != 0 || st.Buckets != 0 {
		t.Fatalf("after release state = %+v, want empty (entry and buckets gone)", st)
	}
	// A fresh principal entry starts with a full bucket.
	if _, r := q.TryAdmit(priority.Hydration, "w", t0); r != "" {
		t.Fatalf("fresh bucket: reason %q", r)
	}
}

func TestPlanAdmissions(t *testing.T) {
	t0 := time.Unix(100, 0)
	pending := []admission.Pending{
		{Class: priority.BackgroundIngestion},
		{Class: priority.Orchestration},
		{Class: priority.Interactive, Deadline: t0.Add(2 * time.Second)},
		{Class: priority.Interactive},
		{Class: priority.Interactive, Deadline: t0.Add(time.Second)},
		{Class: priority.Hydration},
		{Class: priority.Orchestration},
	}
	got := admission.PlanAdmissions(pending, 5)
	want := []int{4, 2, 3, 1, 6}
	if len(got) != len(want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("plan = %v, want %v", got, want)
		}
	}
	if n := len(admission.PlanAdmissions(pending, -1)); n != 0 {
		t.Fatalf("negative available planned %d", n)
	}
}

// Property: whatever sequence of admissions and releases runs, QoS never
// exceeds a class ceiling or a principal's quota, and releasing everything
// leaves no principal or bucket behind.
func TestQoSProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 40).Draw(t, "capacity")
		q := admission.NewQoS(admission.QoSConfig{}, capacity)
		lim := q.Limits()
		now := time.Unix(0, 0)
		var held []*admission.QoSPermit
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 50).Draw(t, "ms")) * time.Millisecond)
			if len(held) > 0 && rapid.Bool().Draw(t, "release") {
				i := rapid.IntRange(0, len(held)-1).Draw(t, "which")
				held[i].Release()
				held = append(held[:i], held[i+1:]...)
				continue
			}
			c := rapid.SampledFrom(priority.All[:]).Draw(t, "class")
			p := rapid.SampledFrom([]string{"a", "b", "c", "anonymous"}).Draw(t, "principal")
			before := q.State().InFlight
			permit, reason := q.TryAdmit(c, p, now)
			if permit == nil {
				if reason == "" {
					t.Fatal("no permit and no reason")
				}
				continue
			}
			if before >= lim.Ceilings[c.Order()] {
				t.Fatalf("%v admitted at in_flight %d >= ceiling %d", c, before, lim.Ceilings[c.Order()])
			}
			held = append(held, permit)
			if st := q.State(); st.InFlight > lim.Capacity {
				t.Fatalf("in_flight %d > capacity %d", st.InFlight, lim.Capacity)
			}
		}
		for _, h := range held {
			h.Release()
		}
		if st := q.State(); st.InFlight != 0 || st.Principals != 0 || st.Buckets != 0 {
			t.Fatalf("state after releasing everything: %+v", st)
		}
	})
}

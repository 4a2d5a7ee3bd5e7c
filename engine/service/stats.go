package service

import (
	"sync/atomic"

	"github.com/nats-io/nats.go/micro"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/priority"
)

var reasons = [...]admission.Reason{admission.ReasonCapacity, admission.ReasonQuota, admission.ReasonBackpressure, admission.ReasonFairShare, admission.ReasonRateLimited}

func reasonIndex(r admission.Reason) int {
	for i, x := range reasons {
		if x == r {
			return i
		}
	}
	return 0
}

// endpointStats are one endpoint's admission counters, reported in the
// data field of $SRV.STATS.
type endpointStats struct {
	inFlight [4]atomic.Int64
	shedN    [4][len(reasons)]atomic.Int64
	readLane atomic.Int64
}

func (e *endpointStats) shed(c priority.Class, r admission.Reason) {
	e.shedN[c.Order()][reasonIndex(r)].Add(1)
}

// EndpointData is the data of one endpoint in $SRV.STATS: in-flight
// requests per class, shed counts per class and reason, and reads admitted
// on the reserved lane. Empty entries are omitted.
type EndpointData struct {
	Op          string                      `json:"op"`
	Write       bool                        `json:"write"`
	InFlight    map[string]int64            `json:"in_flight,omitempty"`
	Shed        map[string]map[string]int64 `json:"shed,omitempty"`
	ReadLane    int64                       `json:"read_reserved_admitted,omitempty"`
	MaxInFlight int                         `json:"max_in_flight"`
}

// endpointStats is the micro StatsHandler.
func (s *Service) endpointStats(me *micro.Endpoint) any {
	for _, ep := range s.endpoints {
		if ep.name != me.Name {
			continue
		}
		d := EndpointData{Op: ep.op, Write: ep.write, ReadLane: ep.stats.readLane.Load(), MaxInFlight: s.gate.Sizes().MaxInFlight}
		for _, c := range priority.All {
			if n := ep.stats.inFlight[c.Order()].Load(); n != 0 {
				if d.InFlight == nil {
					d.InFlight = map[string]int64{}
				}
				d.InFlight[c.String()] = n
			}
			for i, r := range reasons {
				if n := ep.stats.shedN[c.Order()][i].Load(); n != 0 {
					if d.Shed == nil {
						d.Shed = map[string]map[string]int64{}
					}
					if d.Shed[c.String()] == nil {
						d.Shed[c.String()] = map[string]int64{}
					}
					d.Shed[c.String()][string(r)] = n
				}
			}
		}
		return d
	}
	return nil
}

func metric1(k, v string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(k, v)))
}

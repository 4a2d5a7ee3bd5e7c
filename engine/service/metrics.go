package service

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/priority"
)

// maxGraphLabels bounds the distinct graph label values of graph_ops_total.
const maxGraphLabels = 128

// overflowGraph is the graph label of graphs past maxGraphLabels.
const overflowGraph = "__overflow__"

// requestBuckets are the request_seconds bucket bounds, 100 µs to 30 s.
var requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// instruments are the engine's metrics (engine spec §13).
type instruments struct {
	busy          metric.Int64Counter
	readReserved  metric.Int64Counter
	inFlight      metric.Int64UpDownCounter
	deadline      metric.Int64Counter
	authFailures  metric.Int64Counter
	accessDenied  metric.Int64Counter
	qosAdmitted   metric.Int64Counter
	qosShed       metric.Int64Counter
	qosInFlight   metric.Int64UpDownCounter
	qosDispatch   metric.Float64Histogram
	requests      metric.Int64Counter
	requestTime   metric.Float64Histogram
	graphOps      metric.Int64Counter
	registrations []metric.Registration

	// Attribute sets built once, so recording allocates nothing.
	classSets   [len(priority.All)]metric.MeasurementOption
	reasonSets  [len(priority.All)][len(reasons)]metric.MeasurementOption
	overflowSet metric.MeasurementOption
	mu          sync.Mutex
	graphs      map[string]metric.MeasurementOption
}

func newInstruments(mp metric.MeterProvider, gate *admission.Gate) (*instruments, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/edictrt/edict/engine/service")
	in := &instruments{graphs: map[string]metric.MeasurementOption{}, overflowSet: metric1("graph", overflowGraph)}
	for _, c := range priority.All {
		in.classSets[c.Order()] = metric.WithAttributeSet(attribute.NewSet(attribute.String("class", c.String())))
		for i, r := range reasons {
			in.reasonSets[c.Order()][i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("class", c.String()), attribute.String("reason", string(r))))
		}
	}
	var errs []error
	c := func(name, desc string) metric.Int64Counter {
		x, err := m.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	u := func(name, desc string) metric.Int64UpDownCounter {
		x, err := m.Int64UpDownCounter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	h := func(name, desc string) metric.Float64Histogram {
		x, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(requestBuckets...))
		errs = append(errs, err)
		return x
	}
	in.busy = c("edict_engine_busy_rejections_total", "Requests shed with BUSY, by class and reason (capacity for the baseline gate, else the QoS reason).")
	in.readReserved = c("edict_engine_read_reserved_admitted_total", "Reads admitted on the reserved read lane after the normal path was saturated.")
	in.inFlight = u("edict_engine_in_flight", "Admitted requests in flight, by class.")
	in.deadline = c("edict_engine_dispatch_deadline_exceeded_total", "Requests abandoned at the dispatch deadline.")
	in.authFailures = c("edict_engine_auth_failures_total", "Requests refused because no principal could be established.")
	in.accessDenied = c("edict_engine_access_denied_total", "Requests refused by the access check.")
	in.qosAdmitted = c("edict_engine_qos_admitted_total", "Requests admitted by QoS, by class.")
	in.qosShed = c("edict_engine_qos_shed_total", "Requests shed by QoS, by class and reason.")
	in.qosInFlight = u("edict_engine_qos_class_in_flight", "QoS permits held, by class.")
	in.qosDispatch = h("edict_engine_qos_class_dispatch_seconds", "Time QoS-admitted requests held their permit, by class.")
	in.requests = c("edict_engine_requests_total", "Requests received, by op.")
	in.requestTime = h("edict_engine_request_seconds", "Request latency from dispatch to reply, by op.")
	in.graphOps = c("edict_engine_graph_ops_total", "Graph requests, by graph (at most 128 graphs, the rest __overflow__).")
	avail, err := m.Int64ObservableGauge("edict_engine_inflight_permits_available", metric.WithDescription("Free permits of the global admission pool."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(avail, int64(gate.GlobalAvailable()))
		return nil
	}, avail)
	if err != nil {
		return nil, err
	}
	in.registrations = append(in.registrations, reg)
	return in, nil
}

func (in *instruments) close() {
	for _, r := range in.registrations {
		_ = r.Unregister()
	}
}

// classSet returns the {class} attribute set of c.
func (in *instruments) classSet(c priority.Class) metric.MeasurementOption {
	return in.classSets[c.Order()]
}

// classReason returns the {class, reason} attribute set.
func (in *instruments) classReason(c priority.Class, r admission.Reason) metric.MeasurementOption {
	return in.reasonSets[c.Order()][reasonIndex(r)]
}

func opSet(op string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op)))
}

// graphSet returns the {graph} attribute set of graph, or the one of
// __overflow__ once maxGraphLabels distinct graphs have been labelled.
func (in *instruments) graphSet(graph string) metric.MeasurementOption {
	in.mu.Lock()
	defer in.mu.Unlock()
	if o, ok := in.graphs[graph]; ok {
		return o
	}
	if len(in.graphs) >= maxGraphLabels {
		return in.overflowSet
	}
	o := metric1("graph", graph)
	in.graphs[graph] = o
	return o
}

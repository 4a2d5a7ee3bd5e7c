package llmgate

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/edictrt/edict/priority"
)

// scope is the instrumentation scope of the gate's meter and tracer.
const scope = "github.com/edictrt/edict/llmgate"

// The metric names, as scraped.
const (
	metricInFlight = "edict_llmgate_in_flight"
	metricWaiting  = "edict_llmgate_waiting"
	metricWait     = "edict_llmgate_wait_seconds"
	metricAdmitted = "edict_llmgate_admitted_total"
)

// spanWait is the name of the child span recorded for a slow wait.
const spanWait = "llmgate.wait"

// attrModel is the span attribute naming the gate's model.
const attrModel = attribute.Key("edict.llmgate.model")

// waitBuckets are the wait histogram's bucket bounds in seconds.
var waitBuckets = []float64{0, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// observer records a gate's metrics and slow-wait spans. Its zero value
// records nothing. The gauges and the admitted counter are observed from
// the gate's counters at collection time, so admission itself only records
// the wait histogram.
type observer struct {
	hist    metric.Float64Histogram // nil without a meter provider
	recOpts [4][]metric.RecordOption
	reg     metric.Registration
	tracer  trace.Tracer // nil without a tracer provider
	slow    time.Duration
}

func (o *observer) init(g *Gate, cfg Config) error {
	o.slow = cfg.SlowWait
	if o.slow == 0 {
		o.slow = DefaultSlowWait
	}
	if cfg.TracerProvider != nil {
		o.tracer = cfg.TracerProvider.Tracer(scope)
	}
	if cfg.MeterProvider == nil {
		return nil
	}
	m := cfg.MeterProvider.Meter(scope)
	hist, err := m.Float64Histogram(metricWait, metric.WithUnit("s"),
		metric.WithDescription("Time from Acquire to admission at the LLM gate."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return err
	}
	inFlight, err := m.Int64ObservableGauge(metricInFlight,
		metric.WithDescription("LLM gate slots held, all classes together."))
	if err != nil {
		return err
	}
	waiting, err := m.Int64ObservableGauge(metricWaiting,
		metric.WithDescription("Callers parked at the LLM gate."))
	if err != nil {
		return err
	}
	admitted, err := m.Int64ObservableCounter(metricAdmitted,
		metric.WithDescription("Calls admitted by the LLM gate."))
	if err != nil {
		return err
	}
	modelAttr := attribute.String("model", g.model)
	modelSet := metric.WithAttributeSet(attribute.NewSet(modelAttr))
	var classSets [4]metric.MeasurementOption
	for _, c := range priority.All {
		classSets[c.Order()] = metric.WithAttributeSet(attribute.NewSet(modelAttr,
			attribute.String("class", c.String())))
		o.recOpts[c.Order()] = []metric.RecordOption{classSets[c.Order()]}
	}
	reg, err := m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		s := g.Stats()
		obs.ObserveInt64(inFlight, int64(s.InFlight), modelSet)
		for i, set := range classSets {
			obs.ObserveInt64(waiting, s.Waiting[i], set)
			obs.ObserveInt64(admitted, s.Admitted[i], set)
		}
		return nil
	}, inFlight, waiting, admitted)
	if err != nil {
		return err
	}
	o.hist, o.reg = hist, reg
	return nil
}

// admitted records an admission that did not wait.
func (o *observer) admitted(ctx context.Context, c priority.Class, wait float64) {
	if o.hist != nil {
		o.hist.Record(ctx, wait, o.recOpts[c.Order()]...)
	}
}

// waited records a wait that blocked, from start to end; err is the
// context's error when the caller gave up.
func (o *observer) waited(ctx context.Context, model string, c priority.Class, start, end time.Time, err error) {
	d := end.Sub(start)
	if o.hist != nil && err == nil {
		o.hist.Record(ctx, d.Seconds(), o.recOpts[c.Order()]...)
	}
	if o.tracer == nil || (o.slow > 0 && d < o.slow) {
		return
	}
	_, span := o.tracer.Start(ctx, spanWait, trace.WithTimestamp(start),
		trace.WithAttributes(priority.Attribute(c), attrModel.String(model)))
	if err != nil {
		span.RecordError(err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, "llmgate: wait abandoned")
	}
	span.End(trace.WithTimestamp(end))
}

package llmgate

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/edictrt/edict/priority"
)

func TestMetricsAndSlowWaitSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		g := newGate(t, Config{Capacity: 2, Model: "qwen", SlowWait: time.Second,
			MeterProvider: mp, TracerProvider: tp})

		if !g.TryAcquire(with(inte)) || !g.TryAcquire(with(inte)) {
			t.Fatal("setup")
		}
		parent, span := tp.Tracer("test").Start(with(bgc), "ingest")
		slow := make(chan error, 1)
		go func() { slow <- g.Acquire(parent) }()
		quick := start(g, orch)
		synctest.Wait()

		rm := collect(t, reader)
		if v := gauge(t, rm, metricInFlight, attribute.String("model", "qwen")); v != 2 {
			t.Fatalf("in flight = %d, want 2", v)
		}
		if v := gauge(t, rm, metricWaiting, attribute.String("model", "qwen"), attribute.String("class", "background_ingestion")); v != 1 {
			t.Fatalf("background waiting = %d, want 1", v)
		}
		time.Sleep(500 * time.Millisecond)
		g.Release() // quick (orchestration, high) gets it after 0.5s: no span
		synctest.Wait()
		time.Sleep(1500 * time.Millisecond)
		g.Release() // 1 in flight, background ceiling 1: slow still waits
		g.Release() // slow gets it after 2s
		synctest.Wait()
		if err := <-slow; err != nil || !quick.admitted() {
			t.Fatalf("slow %v quick %v", err, quick.admitted())
		}
		span.End()

		ctx, cancel := context.WithTimeout(with(hydr), 3*time.Second)
		defer cancel()
		g.TryAcquire(with(inte))
		if err := g.Acquire(ctx); err == nil { // full: times out after 3s
			t.Fatal("Acquire on a full gate succeeded")
		}
		g.Release()
		g.Release()

		rm = collect(t, reader)
		if v := sum(t, rm, metricAdmitted, attribute.String("class", "interactive")); v != 3 {
			t.Fatalf("interactive admitted = %d, want 3", v)
		}
		if v := sum(t, rm, metricAdmitted, attribute.String("class", "background_ingestion")); v != 1 {
			t.Fatalf("background admitted = %d, want 1", v)
		}
		h := histogram(t, rm, metricWait, attribute.String("class", "background_ingestion"))
		if h.Count != 1 || h.Sum != 2 {
			t.Fatalf("background wait histogram: count %d sum %v, want 1 and 2s", h.Count, h.Sum)
		}
		if h := histogram(t, rm, metricWait, attribute.String("class", "interactive")); h.Count != 3 || h.Sum != 0 {
			t.Fatalf("interactive wait histogram: count %d sum %v", h.Count, h.Sum)
		}

		var waits []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == spanWait {
				waits = append(waits, s)
			}
		}
		if len(waits) != 2 {
			t.Fatalf("%d wait spans, want 2 (the 2s and the abandoned 3s wait, not the 0.5s one)", len(waits))
		}
		bg, hy := waits[0], waits[1]
		if bg.Parent().SpanID() != span.SpanContext().SpanID() || bg.EndTime().Sub(bg.StartTime()) != 2*time.Second {
			t.Fatalf("background wait span: parent %v, duration %v", bg.Parent().SpanID(), bg.EndTime().Sub(bg.StartTime()))
		}
		if !hasAttr(bg.Attributes(), priority.Attribute(bgc)) || !hasAttr(bg.Attributes(), attrModel.String("qwen")) {
			t.Fatalf("background wait span attributes %v", bg.Attributes())
		}
		if !hasAttr(hy.Attributes(), priority.Attribute(hydr)) || hy.Status().Code != codes.Error {
			t.Fatalf("abandoned wait span: attributes %v status %v", hy.Attributes(), hy.Status())
		}
	})
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func find(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Aggregation {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func gauge(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	for _, dp := range find(t, rm, name).(metricdata.Gauge[int64]).DataPoints {
		if matches(dp.Attributes, want) {
			return dp.Value
		}
	}
	t.Fatalf("%s: no point with %v", name, want)
	return 0
}

func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	for _, dp := range find(t, rm, name).(metricdata.Sum[int64]).DataPoints {
		if matches(dp.Attributes, want) {
			return dp.Value
		}
	}
	t.Fatalf("%s: no point with %v", name, want)
	return 0
}

func histogram(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	for _, dp := range find(t, rm, name).(metricdata.Histogram[float64]).DataPoints {
		if matches(dp.Attributes, want) {
			return dp
		}
	}
	t.Fatalf("%s: no point with %v", name, want)
	return metricdata.HistogramDataPoint[float64]{}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv == want {
			return true
		}
	}
	return false
}

package service_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/priority"
)

func TestServerSpanContinuesTheCallersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	e := startEngine(t, service.Config{
		TracerProvider: tp,
		Ceilings:       identity.Ceilings{"APP/app": priority.Hydration},
		Admission:      admission.Config{MaxInFlight: 4},
	}, 0)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	hdr := map[string]string{
		"traceparent":         "00-" + traceID + "-00f067aa0ba902b7-01",
		"X-Resource-Priority": "interactive",
	}
	mustCall(t, e.app, "edict.eg.g1.node_put", `{"id":"a"}`, hdr)
	mustCall(t, e.app, "edict.eg.g1.node_get", `{"id":"a","bogus":1}`, hdr)
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	want := []map[attribute.Key]string{
		{"edict.op": "node_put", "edict.graph": "g1", "edict.priority.class": "hydration", "edict.admission": "granted"},
		{"edict.op": "node_get", "edict.graph": "g1", "edict.admission": "bad_request"},
	}
	for i, s := range spans {
		if s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d kind %v", i, s.SpanKind())
		}
		if got := s.SpanContext().TraceID().String(); got != traceID {
			t.Errorf("span %d trace %s, want the caller's %s", i, got, traceID)
		}
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.Emit()
		}
		for k, v := range want[i] {
			if attrs[k] != v {
				t.Errorf("span %d %s = %q, want %q", i, k, attrs[k], v)
			}
		}
	}
}

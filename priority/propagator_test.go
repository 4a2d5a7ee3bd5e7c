package priority_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/priority"
)

func composite() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, priority.Propagator{})
}

func spanContext(t *testing.T) context.Context {
	t.Helper()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

func TestHTTPRoundTrip(t *testing.T) {
	ctx := spanContext(t)
	m, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(m)
	ctx = baggage.ContextWithBaggage(ctx, bag)
	ctx = priority.With(ctx, priority.Interactive)

	h := http.Header{}
	composite().Inject(ctx, propagation.HeaderCarrier(h))
	if got := h.Get(priority.Header); got != "interactive" {
		t.Fatalf("header = %q", got)
	}
	b, err := baggage.Parse(h.Get("baggage"))
	if err != nil {
		t.Fatalf("baggage %q: %v", h.Get("baggage"), err)
	}
	if b.Member("tenant").Value() != "acme" || b.Member("edict.priority").Value() != "interactive" {
		t.Fatalf("baggage = %q: both members must survive", h.Get("baggage"))
	}

	out := composite().Extract(context.Background(), propagation.HeaderCarrier(h))
	if got := priority.From(out); got != priority.Interactive {
		t.Fatalf("extracted class = %v", got)
	}
	if got := trace.SpanContextFromContext(out).TraceID(); got != trace.SpanContextFromContext(ctx).TraceID() {
		t.Fatalf("trace id = %v", got)
	}
	if baggage.FromContext(out).Member("tenant").Value() != "acme" {
		t.Fatal("tenant baggage lost")
	}
}

func TestInjectUntagged(t *testing.T) {
	h := http.Header{}
	h.Set(priority.Header, "hydration")
	priority.Propagator{}.Inject(context.Background(), propagation.HeaderCarrier(h))
	if got := h.Get(priority.Header); got != "hydration" {
		t.Fatalf("untagged inject changed the existing header to %q", got)
	}
	if h.Get("baggage") != "" {
		t.Fatal("untagged inject wrote baggage")
	}
	empty := http.Header{}
	priority.Propagator{}.Inject(context.Background(), propagation.HeaderCarrier(empty))
	if len(empty) != 0 {
		t.Fatalf("untagged inject wrote %v", empty)
	}
}

func TestInjectMergesUnparsableBaggage(t *testing.T) {
	c := priority.Carrier{"baggage": {"not a valid baggage===="}}
	priority.Propagator{}.Inject(priority.With(context.Background(), priority.Hydration), c)
	got := c.Get("baggage")
	if !strings.HasPrefix(got, "not a valid baggage====") || !strings.HasSuffix(got, "edict.priority=hydration") {
		t.Fatalf("baggage = %q", got)
	}
}

func TestExtractRules(t *testing.T) {
	long := strings.Repeat("i", 65)
	tests := []struct {
		name   string
		header map[string][]string
		start  priority.Class // 0: untagged
		want   priority.Class
		tagged bool
	}{
		{"header", map[string][]string{"X-Resource-Priority": {"interactive"}}, 0, priority.Interactive, true},
		{"lower-case name", map[string][]string{"x-resource-priority": {" HYDRATION "}}, 0, priority.Hydration, true},
		{"header beats baggage", map[string][]string{"X-Resource-Priority": {"interactive"}, "baggage": {"edict.priority=background_ingestion"}}, 0, priority.Interactive, true},
		{"invalid header falls to baggage", map[string][]string{"X-Resource-Priority": {"urgent"}, "baggage": {"a=b,edict.priority=background_ingestion"}}, 0, priority.BackgroundIngestion, true},
		{"oversized header falls to baggage", map[string][]string{"X-Resource-Priority": {long}, "Baggage": {"edict.priority=hydration"}}, 0, priority.Hydration, true},
		{"nothing", map[string][]string{}, 0, 0, false},
		{"unknown everywhere keeps class", map[string][]string{"X-Resource-Priority": {"bogus"}, "baggage": {"edict.priority=bogus"}}, priority.BackgroundIngestion, priority.BackgroundIngestion, true},
		{"oversized baggage ignored", map[string][]string{"baggage": {"edict.priority=" + long}}, 0, 0, false},
		{"garbage baggage ignored", map[string][]string{"baggage": {";;;==,,"}}, 0, 0, false},
		{"broken baggage still finds member", map[string][]string{"baggage": {"bad key=x,edict.priority=interactive"}}, 0, priority.Interactive, true},
		{"empty header value", map[string][]string{"X-Resource-Priority": {""}}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.start != 0 {
				ctx = priority.With(ctx, tt.start)
			}
			for _, carrier := range []propagation.TextMapCarrier{priority.Carrier(tt.header), propagation.HeaderCarrier(http.Header(tt.header))} {
				out := priority.Propagator{}.Extract(ctx, carrier)
				c, ok := priority.Lookup(out)
				if ok != tt.tagged || (ok && c != tt.want) {
					t.Errorf("%T: Lookup = %v, %v; want %v, %v", carrier, c, ok, tt.want, tt.tagged)
				}
			}
		})
	}
}

func TestCarrier(t *testing.T) {
	c := priority.Carrier{"traceparent": {"lower"}, "X-Other": {"x"}}
	if got := c.Get("Traceparent"); got != "lower" {
		t.Fatalf("case-insensitive Get = %q", got)
	}
	c["Traceparent"] = []string{"exact"}
	if got := c.Get("Traceparent"); got != "exact" {
		t.Fatalf("exact match must win, got %q", got)
	}
	c.Set("TRACEPARENT", "new")
	if len(c) != 2 || c.Get("traceparent") != "new" {
		t.Fatalf("Set must replace every case variant: %v", c)
	}
	if got := len(c.Keys()); got != 2 {
		t.Fatalf("Keys = %v", c.Keys())
	}
	if priority.Carrier(nil).Get("x") != "" {
		t.Fatal("nil carrier Get")
	}
}

// TestNATSRoundTrip sends a message with the class and trace context
// through a real in-process nats-server and reads both back, including
// from the lower-case header names other clients send.
func TestNATSRoundTrip(t *testing.T) {
	s := natstest.Run(t, natstest.Options(""))
	nc := natstest.Connect(t, s)
	sub, err := nc.SubscribeSync("edict.test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := priority.With(spanContext(t), priority.BackgroundIngestion)
	msg := nats.NewMsg("edict.test")
	composite().Inject(ctx, priority.Carrier(msg.Header))
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	// A message as another client would send it: lower-case names.
	raw := nats.NewMsg("edict.test")
	raw.Header["traceparent"] = []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	raw.Header["x-resource-priority"] = []string{"Interactive"}
	if err := nc.PublishMsg(raw); err != nil {
		t.Fatal(err)
	}
	const deadline = 5 * time.Second // generous for a loaded CI machine
	want := []priority.Class{priority.BackgroundIngestion, priority.Interactive}
	for i, w := range want {
		got, err := sub.NextMsg(deadline)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		out := composite().Extract(context.Background(), priority.Carrier(got.Header))
		if c, ok := priority.Lookup(out); !ok || c != w {
			t.Errorf("message %d: class = %v, %v; want %v", i, c, ok, w)
		}
		sc := trace.SpanContextFromContext(out)
		if !sc.IsValid() || sc.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
			t.Errorf("message %d: trace context lost: %v", i, sc)
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("interactive", "edict.priority=hydration")
	f.Add(strings.Repeat("x", 100), "a=b")
	f.Add("", "edict.priority="+strings.Repeat("y", 80))
	f.Add("\x00", ",,,;;==")
	f.Fuzz(func(t *testing.T, header, bag string) {
		c := priority.Carrier{"x-resource-priority": {header}, "baggage": {bag}}
		out := composite().Extract(context.Background(), c)
		if got, ok := priority.Lookup(out); ok && !got.Valid() {
			t.Fatalf("extracted invalid class %d", got)
		}
		// Inject into the same carrier never panics and keeps it parseable by us.
		priority.Propagator{}.Inject(priority.With(out, priority.Interactive), c)
		if got := priority.From(priority.Propagator{}.Extract(context.Background(), c)); got != priority.Interactive {
			t.Fatalf("after inject, extract = %v", got)
		}
	})
}

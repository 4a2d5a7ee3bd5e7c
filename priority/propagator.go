package priority

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
)

// Header is the header that carries a class's wire name across processes.
const Header = "X-Resource-Priority"

// BaggageKey is the W3C baggage member that carries a class's wire name.
const BaggageKey = "edict.priority"

const baggageHeader = "baggage"

// maxValue is the longest header or baggage value Extract will consider.
const maxValue = 64

// Propagator is an OpenTelemetry propagation.TextMapPropagator for the
// class. Inject writes [Header] and merges the baggage member edict.priority
// into the carrier's baggage header; an untagged context injects nothing.
// Extract reads the header first (name in any case), then the baggage member;
// an absent, unknown or oversized value is ignored and the context keeps its
// class. Extract never fails.
//
// Place it after propagation.Baggage{} in a composite propagator.
type Propagator struct{}

var _ propagation.TextMapPropagator = Propagator{}

// Inject writes ctx's class, if it has one, into carrier.
func (Propagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	c, ok := Lookup(ctx)
	if !ok {
		return
	}
	carrier.Set(Header, c.String())
	member, err := baggage.NewMember(BaggageKey, c.String())
	if err != nil {
		return
	}
	existing := getFold(carrier, baggageHeader)
	bag, err := baggage.Parse(existing)
	if err != nil {
		// The carrier's baggage does not parse: keep it verbatim, add ours.
		carrier.Set(baggageHeader, existing+","+member.String())
		return
	}
	if bag, err = bag.SetMember(member); err == nil {
		carrier.Set(baggageHeader, bag.String())
	}
}

// Extract returns ctx with the class found in carrier, or ctx unchanged.
func (Propagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if c, ok := parseValue(getFold(carrier, Header)); ok {
		return With(ctx, c)
	}
	if raw := getFold(carrier, baggageHeader); raw != "" {
		if c, ok := fromBaggage(raw); ok {
			return With(ctx, c)
		}
	}
	return ctx
}

// Fields returns the header names Inject sets.
func (Propagator) Fields() []string { return []string{Header, baggageHeader} }

func parseValue(v string) (Class, bool) {
	if v == "" || len(v) > maxValue {
		return 0, false
	}
	c, err := Parse(v)
	return c, err == nil
}

// fromBaggage finds the edict.priority member in a raw baggage header
// without requiring the rest of the header to parse.
func fromBaggage(raw string) (Class, bool) {
	for part := range strings.SplitSeq(raw, ",") {
		kv, _, _ := strings.Cut(part, ";")
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == BaggageKey {
			return parseValue(strings.TrimSpace(v))
		}
	}
	return 0, false
}

// getFold reads key from carrier whatever the letter case of the stored
// name. Map-backed carriers are read directly: propagation.HeaderCarrier's
// Get canonicalizes the name and would miss a non-canonical key.
func getFold(carrier propagation.TextMapCarrier, key string) string {
	switch c := carrier.(type) {
	case Carrier:
		return c.Get(key)
	case propagation.HeaderCarrier:
		return Carrier(c).Get(key)
	}
	if v := carrier.Get(key); v != "" {
		return v
	}
	for _, k := range carrier.Keys() {
		if strings.EqualFold(k, key) {
			if v := carrier.Get(k); v != "" {
				return v
			}
		}
	}
	return ""
}

package priority

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Class is a priority class. The zero value is not a valid class; use one of
// the constants.
type Class uint8

// The four classes, in the order used where one must be chosen over another.
const (
	Interactive Class = iota + 1
	Orchestration
	Hydration
	BackgroundIngestion
)

// All lists every class from highest to lowest order.
var All = [...]Class{Interactive, Orchestration, Hydration, BackgroundIngestion}

// AttributeKey is the OpenTelemetry attribute key under which spans and
// metrics record a class.
const AttributeKey = attribute.Key("edict.priority.class")

var wireNames = [...]string{
	Interactive:         "interactive",
	Orchestration:       "orchestration",
	Hydration:           "hydration",
	BackgroundIngestion: "background_ingestion",
}

var ranks = [...]int{
	Interactive:         0,
	Orchestration:       1,
	Hydration:           1,
	BackgroundIngestion: 3,
}

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool { return c >= Interactive && c <= BackgroundIngestion }

// Rank returns the class's rank: 0 for Interactive, 1 for Orchestration and
// Hydration, 3 for BackgroundIngestion. Lower is sooner. An invalid class
// ranks as Orchestration.
func (c Class) Rank() int {
	if !c.Valid() {
		return ranks[Orchestration]
	}
	return ranks[c]
}

// High reports whether the class belongs to the interactive floor: every
// class but BackgroundIngestion.
func (c Class) High() bool { return c != BackgroundIngestion }

// Order returns the class's position in the total order Interactive (0) >
// Orchestration (1) > Hydration (2) > BackgroundIngestion (3). Unlike Rank it
// breaks the tie between Orchestration and Hydration.
func (c Class) Order() int {
	if !c.Valid() {
		return int(Orchestration - 1)
	}
	return int(c - 1)
}

// Higher reports whether c comes before d in the class order.
func (c Class) Higher(d Class) bool { return c.Order() < d.Order() }

// Clamp returns c, or ceiling when c is higher than ceiling: the result is
// never higher than ceiling.
func (c Class) Clamp(ceiling Class) Class {
	if c.Higher(ceiling) {
		return ceiling
	}
	return c
}

// String returns the canonical wire name.
func (c Class) String() string {
	if !c.Valid() {
		return fmt.Sprintf("priority.Class(%d)", uint8(c))
	}
	return wireNames[c]
}

// MarshalText implements encoding.TextMarshaler with the wire name.
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownClass, uint8(c))
	}
	return []byte(wireNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler through [Parse].
func (c *Class) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// maxParse bounds the text Parse inspects, so hostile input costs nothing.
const maxParse = 64

// Parse returns the class whose wire name is s, after trimming surrounding
// white space and ignoring letter case (" INTERACTIVE " is Interactive).
// Anything else is an error wrapping [ErrUnknownClass].
func Parse(s string) (Class, error) {
	if len(s) <= maxParse {
		t := strings.TrimSpace(s)
		for _, c := range All {
			if t == wireNames[c] || strings.EqualFold(t, wireNames[c]) {
				return c, nil
			}
		}
	}
	if len(s) > maxParse {
		s = s[:maxParse] + "…"
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownClass, s)
}

// Attribute returns the span and metric attribute edict.priority.class with
// the class's wire name.
func Attribute(c Class) attribute.KeyValue { return AttributeKey.String(c.String()) }

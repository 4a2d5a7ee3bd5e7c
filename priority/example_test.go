package priority_test

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/edictrt/edict/priority"
)

func Example() {
	ctx := priority.With(context.Background(), priority.Interactive)

	// Outbound: the class travels as a header and a baggage member.
	prop := propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}, priority.Propagator{})
	h := http.Header{}
	prop.Inject(ctx, propagation.HeaderCarrier(h))
	fmt.Println(h.Get(priority.Header), h.Get("baggage"))

	// Inbound: the receiver's context carries the class.
	in := prop.Extract(context.Background(), propagation.HeaderCarrier(h))
	fmt.Println(priority.From(in), priority.From(in).Rank(), priority.From(in).High())

	// Untagged work is high; only background work yields.
	fmt.Println(priority.From(context.Background()))
	fmt.Println(priority.ForTaskType("codebase"), priority.ForTaskType("capability_hydration"), priority.LaneOf("conversation"))
	// Output:
	// interactive edict.priority=interactive
	// interactive 0 true
	// orchestration
	// background_ingestion hydration queries
}

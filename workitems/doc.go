// Package workitems is the client side of edict's durable work items: it
// submits items to the engine's edict.work.<op> endpoints, claims them
// highest class first, settles them with the claim's fencing token (ack,
// retry, defer, extend, dead-letter) and paces its claims per class after
// the engine sheds them.
//
// # Usage
//
//	c, err := workitems.New(nc, workitems.Config{})
//	_, err = c.Submit(ctx, workitems.Item{Type: "conversation", Payload: json.RawMessage(`{"q":"hi"}`)})
//	cl, err := c.Claim(ctx, workitems.ClaimRequest{})
//	if cl != nil { err = cl.Ack(ctx) }
//
// Claim returns (nil, nil) when there is nothing to claim. *Client also
// satisfies scheduler.Claimer, so a scheduler.Pool can drive it.
//
// A worker loop can ack and claim the next item in one engine request, as
// JetStream's +NXT does, which halves its round trips:
//
//	cl, err := c.Claim(ctx, req)
//	for err == nil && cl != nil {
//		work(cl)
//		cl, err = cl.AckNext(ctx, req)
//	}
//
// A *NextError from AckNext means the ack was done and only the next claim
// failed (paced, or an engine error); any other error is the ack's own.
//
// # Idempotent submit
//
// Submitting an Item.ID again answers Receipt.Duplicate and queues nothing
// while the item is queued, leased or dead, and for the engine's dedup
// window (engine/work Config.DedupWindow, default 1 h) after it was
// acknowledged; after the window the ID is new again.
//
// # Claim pacing
//
// Every claim goes through one Pacer (orchestration spec §8). The class is
// the class of the claim call's context (priority.From; untagged is
// Orchestration), never the claim's Classes filter. While a class's backoff
// window is open its claims fail fast with a BUSY: error and the engine is
// not contacted; a shed reply (text starting "BUSY:") opens or lengthens the
// window (0.25 s × 2^(n−1), capped at 30 s, proportional jitter in
// [0.5, 1.0)); any normal answer, "nothing to claim" included, closes it.
// Classes never share state.
//
// # Errors
//
// Engine errors are *EngineError values carrying the engine's code and
// text; errors.Is(err, ErrFenced) reports a stale token (409),
// IsBusyShed(err) a shed or paced claim. A transport error is never a shed.
//
// # Propagation
//
// Requests carry X-Resource-Priority with the context's class and the W3C
// trace context and baggage through the composite OpenTelemetry propagator
// over priority.Carrier(msg.Header).
//
// # Concurrency
//
// A Client and its Claims are safe for concurrent use. The Client never
// closes the connection it was given and starts no goroutines; KeepAlive
// runs on the caller's goroutine until its context ends.
package workitems

// Package service is the edict graph engine's NATS micro service
// "edict-engine": one endpoint per operation (eg_<op> on edict.eg.*.<op>,
// work_<op> on edict.work.<op>, admin_<op> on edict.admin.<op>), strict JSON
// bodies, admission with a reserved read lane (package admission), caller
// identity and class clamping (package identity), and the metrics and spans
// of the engine spec.
//
// # Request path
//
// micro calls an endpoint's handler serially, so everything on the dispatch
// path is non-blocking: the body is decoded strictly (400), the graph token
// of the subject is checked (400), the class is read from
// X-Resource-Priority (unknown: 400) and clamped to the principal's ceiling,
// the op is classified with admission.RequiresWrite, then QoS (when enabled)
// and the baseline gate admit the request or shed it with 503 BUSY. Those
// answers use the micro request's Error. An admitted request runs on its
// own goroutine, bounded by the permits it holds, under the dispatch
// deadline; it replies by publishing to the request's reply subject on the
// service's connection (the micro error headers set by hand for an error)
// and then releases its permits. At the deadline the caller gets 504
// TIMEOUT:, the work's context is cancelled and its permits are released at
// once; a late result is discarded. A reply larger than the connection's
// max_payload is replaced by 413.
//
// An unknown op has no endpoint: the caller gets NATS no responders.
//
// Work endpoints forward to [Config.Work] (a protocol.Handler). Without one
// they are still registered and answer 500 "INTERNAL: work items are not
// configured on this engine": retrying cannot help, so it is not a BUSY.
//
// # Lifecycle
//
// [Start] registers the service on a connection it does not own;
// [Service.Shutdown] stops taking requests and waits for the in-flight ones;
// [Service.Close] is Shutdown without waiting.
package service

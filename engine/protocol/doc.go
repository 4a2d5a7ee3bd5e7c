// Package protocol holds the pieces of the edict-engine wire protocol that
// the engine's service and its sub-services share: subjects and header
// names, the error type that becomes the micro error headers, strict JSON
// decoding, the caller identity of an admitted request and the Handler
// contract through which the service hands an admitted request to the
// component that serves it (for example the work-item service).
//
// The protocol itself is described in docs/PROTOCOL.md. Every
// error the engine answers is an [*Error] with an HTTP-like code; its text
// starts with the documented prefix (BUSY:, FENCED:, TIMEOUT:, …) where the
// protocol names one, so clients in other languages can match it.
package protocol

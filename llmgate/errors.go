package llmgate

import "errors"

// ErrBodyTooLarge is returned by [Transport.RoundTrip] when a gated request's
// body exceeds [Transport.MaxBodyBytes]; the request is not sent.
var ErrBodyTooLarge = errors.New("llmgate: request body too large")

// errOverRelease is the panic value of a Release without a matching
// acquisition.
var errOverRelease = errors.New("llmgate: release of a slot that is not held")

package llmgate

import "errors"

// ErrBodyTooLarge is returned by [Transport.RoundTrip] when a gated request's
// body exceeds [Transport.MaxBodyBytes]; the request is not sent.
var ErrBodyTooLarge = errors.New("llmgate: request body too large")

// ErrTooManyModels is returned by [Transport.RoundTrip] for a request naming
// a model beyond the first [Transport.MaxModels] distinct ones (models in
// [Transport.Capacities] always count as known); the request is not sent.
// Gates are never evicted, so without this bound a caller passing model
// names through from its own users could grow the registry without end.
var ErrTooManyModels = errors.New("llmgate: too many distinct models")

// errOverRelease is the panic value of a Release without a matching
// acquisition.
var errOverRelease = errors.New("llmgate: release of a slot that is not held")

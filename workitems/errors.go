package workitems

import (
	"errors"
	"strings"
)

var (
	// ErrFenced is matched (errors.Is) by the engine's 409 answer to a
	// stale lease token: the lease expired and the item may belong to
	// another worker; the caller must not commit its result.
	ErrFenced = errors.New("workitems: stale lease token")
	// ErrBackend is wrapped by errors for engine replies that do not make
	// sense, such as a claimed reply without its token.
	ErrBackend = errors.New("workitems: malformed engine reply")
	// ErrNoConn is returned by New for a nil connection.
	ErrNoConn = errors.New("workitems: nil nats connection")
)

// EngineError is an error answer of the engine: Code is the
// Nats-Service-Error-Code (HTTP-like), Text the Nats-Service-Error.
type EngineError struct {
	Op   string
	Code int
	Text string
}

// Error returns the engine's text, so a shed reads "BUSY: …".
func (e *EngineError) Error() string { return e.Text }

// Is reports whether target is ErrFenced and e is the engine's fencing answer.
func (e *EngineError) Is(target error) bool {
	return target == ErrFenced && e.Code == 409 && strings.HasPrefix(e.Text, "FENCED:")
}

// PacedError is returned by a claim whose class is inside its pacing
// window; the engine was not contacted.
type PacedError struct {
	text string
}

// Error returns "BUSY: client-side claim pacing active for class '<class>',
// retry after <s>s (engine not contacted)".
func (e *PacedError) Error() string { return e.text }

// IsBusyShed reports whether err is the engine's shed reply (an engine error
// with code 503 whose text starts with "BUSY:", case-sensitive, untrimmed) or the client's
// own pacing error. A transport or connection error is never a shed,
// whatever its text.
func IsBusyShed(err error) bool {
	var pe *PacedError
	if errors.As(err, &pe) {
		return true
	}
	var ee *EngineError
	return errors.As(err, &ee) && ee.Code == 503 && strings.HasPrefix(ee.Text, "BUSY:")
}

package identity

import "errors"

var (
	// ErrUnauthenticated reports a trusted Nats-Request-Info header that does
	// not decode or names no account.
	ErrUnauthenticated = errors.New("identity: authenticated principal is required for admission")
	// ErrUnknownClass reports an X-Resource-Priority value that is not a
	// class.
	ErrUnknownClass = errors.New("identity: unknown priority class")
	// ErrCeiling reports a malformed ceiling specification.
	ErrCeiling = errors.New("identity: bad ceiling")
)

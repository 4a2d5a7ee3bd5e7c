// Package identity establishes who sent an engine request and at which
// priority class it may run.
//
// The principal comes only from the Nats-Request-Info header, which the NATS
// server writes (replacing any client value) when a request crosses an
// account boundary through a service import. A client inside the engine's
// own account could write the header itself, so it is trusted only when the
// caller says so ([Resolver.TrustRequestInfo]): correct only when no
// application holds credentials in the engine's account. The principal is
// "<acc>/<user>" (or "<acc>" when the import does not share the user); the
// connection name is never identity. Untrusted or absent, the principal is
// "anonymous".
//
// The class comes from X-Resource-Priority (absent → Orchestration; a value
// priority.Parse rejects → [ErrUnknownClass]) and is clamped to the
// principal's ceiling ([Ceilings]), so a client can never raise its own
// class or impersonate another principal by writing headers.
//
// Everything here is pure and safe for concurrent use.
package identity

package work

import "encoding/json"

// Request and reply bodies of the work operations (docs/PROTOCOL.md, "Work
// operations"). Field names are part of the protocol.

type submitRequest struct {
	ID          string          `json:"id,omitempty"`
	Type        string          `json:"type"`
	Class       string          `json:"class,omitempty"`
	Tenant      string          `json:"tenant,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
}

type submitReply struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
}

type claimRequest struct {
	Worker       string   `json:"worker"`
	Classes      []string `json:"classes,omitempty"`
	Lanes        []string `json:"lanes,omitempty"`
	Types        []string `json:"types,omitempty"`
	LeaseSeconds float64  `json:"lease_seconds,omitempty"`
	WaitMS       int64    `json:"wait_ms,omitempty"`
}

type claimReply struct {
	Claimed        bool            `json:"claimed"`
	Reason         string          `json:"reason,omitempty"`
	ID             string          `json:"id,omitempty"`
	Type           string          `json:"type,omitempty"`
	Class          string          `json:"class,omitempty"`
	Tenant         string          `json:"tenant,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Attempt        int             `json:"attempt,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	LeaseExpiresAt string          `json:"lease_expires_at,omitempty"`
	Token          string          `json:"token,omitempty"`
}

type extendRequest struct {
	Token        string  `json:"token"`
	LeaseSeconds float64 `json:"lease_seconds,omitempty"`
}

type extendReply struct {
	LeaseExpiresAt string `json:"lease_expires_at"`
}

type tokenRequest struct {
	Token string `json:"token"`
}

// ackRequest is an ack; with next it also claims the next item, in the
// same request (without a long poll: next.wait_ms must be absent).
type ackRequest struct {
	Token string        `json:"token"`
	Next  *claimRequest `json:"next,omitempty"`
}

// ackReply is {} for a plain ack. An ack with next carries the claim's
// reply in next, or, when the ack succeeded but the claim failed, the
// claim's error in next_error.
type ackReply struct {
	Next      *claimReply `json:"next,omitempty"`
	NextError *wireError  `json:"next_error,omitempty"`
}

// wireError is an error inside a reply body: the code and text the error
// headers would carry.
type wireError struct {
	Code int    `json:"code"`
	Text string `json:"text"`
}

type retryRequest struct {
	Token string `json:"token"`
	Error string `json:"error,omitempty"`
}

type retryReply struct {
	Dead   bool   `json:"dead"`
	NextAt string `json:"next_at,omitempty"`
}

type deferRequest struct {
	Token   string `json:"token"`
	Until   string `json:"until,omitempty"`
	DelayMS *int64 `json:"delay_ms,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

type deferReply struct {
	NextAt string `json:"next_at"`
}

type deadRequest struct {
	Token  string `json:"token"`
	Reason string `json:"reason"`
}

type deadListRequest struct {
	Class string `json:"class,omitempty"`
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

type deadItem struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Class    string          `json:"class"`
	Tenant   string          `json:"tenant"`
	Payload  json.RawMessage `json:"payload"`
	Attempts int             `json:"attempts"`
	Reason   string          `json:"reason"`
}

type deadListReply struct {
	Items []deadItem `json:"items"`
	Next  string     `json:"next"`
}

type deadReplayRequest struct {
	IDs []string `json:"ids"`
}

type deadReplayReply struct {
	Replayed int `json:"replayed"`
}

type classStats struct {
	Queued   int `json:"queued"`
	InFlight int `json:"in_flight"`
	Dead     int `json:"dead"`
}

type laneStats struct {
	Queued int `json:"queued"`
}

type statsReply struct {
	Classes map[string]classStats `json:"classes"`
	Lanes   map[string]laneStats  `json:"lanes"`
}

// storedItem is the body of a message on the work stream.
type storedItem struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Class       string          `json:"class"`
	Tenant      string          `json:"tenant,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts"`
}

// storedDead is the body of a message on the dead-letter stream.
type storedDead struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Class       string          `json:"class"`
	Tenant      string          `json:"tenant"`
	Payload     json.RawMessage `json:"payload"`
	Attempts    int             `json:"attempts"`
	Reason      string          `json:"reason"`
	MaxAttempts int             `json:"max_attempts"`
}

package protocol

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/edictrt/edict/priority"
)

// ServiceName is the micro service name of the engine.
const ServiceName = "edict-engine"

// Subject prefixes of the three request families.
const (
	GraphPrefix = "edict.eg."    // edict.eg.<graph>.<op>
	WorkPrefix  = "edict.work."  // edict.work.<op>
	AdminPrefix = "edict.admin." // edict.admin.<op>
)

// Header names.
const (
	// HeaderRequestInfo is set by the NATS server on requests that cross an
	// account boundary through a service import; the only trusted identity.
	HeaderRequestInfo = "Nats-Request-Info"
	// HeaderErrorCode and HeaderError are the micro error headers.
	HeaderErrorCode = "Nats-Service-Error-Code"
	HeaderError     = "Nats-Service-Error"
)

// DefaultGraph is the graph used when none is named.
const DefaultGraph = "__commons__"

// Anonymous is the principal of a request without trusted identity.
const Anonymous = "anonymous"

// BusyCapacity is the baseline shed text.
const BusyCapacity = "BUSY: server at capacity, retry with backoff"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidName reports whether s is a valid graph name or task type: one NATS
// subject token of 1..128 ASCII letters, digits, '_' or '-'.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Error codes, as in HTTP.
const (
	CodeBadRequest = 400
	CodeForbidden  = 403
	CodeNotFound   = 404
	CodeConflict   = 409
	CodeTooLarge   = 413
	CodeInternal   = 500
	CodeBusy       = 503
	CodeTimeout    = 504
)

// Error is an engine error reply: Code goes into Nats-Service-Error-Code and
// Text into Nats-Service-Error.
type Error struct {
	Code int
	Text string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Text) }

// Errorf returns an *Error with code and a formatted text.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 error.
func BadRequest(format string, args ...any) *Error { return Errorf(CodeBadRequest, format, args...) }

// NotFound returns a 404 error.
func NotFound(format string, args ...any) *Error { return Errorf(CodeNotFound, format, args...) }

// Conflict returns a 409 error.
func Conflict(format string, args ...any) *Error { return Errorf(CodeConflict, format, args...) }

// TooLarge returns a 413 error.
func TooLarge(format string, args ...any) *Error { return Errorf(CodeTooLarge, format, args...) }

// Busy returns a 503 error whose text is "BUSY: <reason>, retry with backoff".
func Busy(reason string) *Error {
	return &Error{Code: CodeBusy, Text: "BUSY: " + reason + ", retry with backoff"}
}

// Fenced is the 409 answer to a stale work-item or lease token.
func Fenced() *Error { return &Error{Code: CodeConflict, Text: "FENCED: stale lease token"} }

// As converts err into an *Error: an *Error in its chain is returned as is,
// a context deadline becomes 504 TIMEOUT:, anything else 500.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeTimeout, Text: "TIMEOUT: dispatch deadline exceeded"}
	}
	return &Error{Code: CodeInternal, Text: "INTERNAL: " + err.Error()}
}

// Decode decodes one JSON object from body into v strictly: unknown fields
// and trailing data are rejected, and a key must match its field's JSON
// name letter for letter at every depth. An empty body decodes as {}.
// Errors are 400.
//
// The accepting path is one json.Unmarshal (which also rejects trailing
// data) and one walk of the body's keys that allocates only for escaped
// keys and the paths of nested objects; a body it rejects is decoded again
// the slow way, so the error text is the streaming decoder's (the first
// unknown field in body order, and so on).
func Decode(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	if json.Unmarshal(body, v) == nil && exactKeys(body, v) == nil {
		return nil
	}
	return decodeSlow(body, v)
}

// decodeSlow is Decode by a streaming decoder with unknown fields
// disallowed; it names the error of a body Decode rejects.
func decodeSlow(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BadRequest("malformed request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("malformed request: trailing data after the JSON object")
	}
	return exactKeys(body, v)
}

// exactKeys rejects a key of body that is not, letter for letter, a JSON
// field name of the struct it decodes into, at every depth (structs, and
// slices, arrays, maps and pointers of structs): encoding/json matches
// names in any letter case, so {"ID":..} would otherwise fill "id"
// silently. Types that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler) are left to their decoder. body must be valid
// JSON that decodes into v.
func exactKeys(body []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	return checkKeys(body, t.Elem(), "")
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func selfDecoding(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

// checkKeys checks raw (valid JSON, already known to decode into t)
// against t's field names; path names the position for the error text.
func checkKeys(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
	default:
		return nil
	}
	info := typeInfoOf(t)
	if info.self {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return eachMember(raw, func(key, val []byte) error {
			ft, ok := info.fields[string(key)]
			if !ok {
				return BadRequest("malformed request: json: unknown field %q", path+string(key))
			}
			if !hasKeys(ft) {
				return nil
			}
			return checkKeys(val, ft, path+string(key)+".")
		})
	case reflect.Map:
		if !info.deep {
			return nil
		}
		return eachMember(raw, func(key, val []byte) error {
			return checkKeys(val, t.Elem(), path+string(key)+".")
		})
	default: // slice, array
		if !info.deep {
			return nil // []byte is base64 text; scalars have no keys
		}
		i := 0
		return eachElement(raw, func(val []byte) error {
			err := checkKeys(val, t.Elem(), path+strconv.Itoa(i)+".")
			i++
			return err
		})
	}
}

// hasKeys reports whether a value of type t can hold keys checkKeys checks.
func hasKeys(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return !typeInfoOf(t).self
	case reflect.Slice, reflect.Array, reflect.Map:
		return typeInfoOf(t).deep
	}
	return false
}

// typeInfo is what checkKeys needs of a type, computed once per type.
type typeInfo struct {
	self   bool                    // decodes itself
	fields map[string]reflect.Type // struct: JSON name → field type
	deep   bool                    // slice, array, map: elements may have keys to check
}

var typeInfos sync.Map // reflect.Type → *typeInfo

func typeInfoOf(t reflect.Type) *typeInfo {
	if v, ok := typeInfos.Load(t); ok {
		return v.(*typeInfo)
	}
	info := &typeInfo{self: selfDecoding(t)}
	switch t.Kind() {
	case reflect.Struct:
		info.fields = structFields(t, nil)
	case reflect.Slice, reflect.Array, reflect.Map:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.Struct, reflect.Slice, reflect.Array, reflect.Map:
			info.deep = true
		}
	}
	v, _ := typeInfos.LoadOrStore(t, info)
	return v.(*typeInfo)
}

// structFields maps the JSON names of struct type t's fields to their
// types, those of untagged embedded structs included.
func structFields(t reflect.Type, fields map[string]reflect.Type) map[string]reflect.Type {
	if fields == nil {
		fields = map[string]reflect.Type{}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// Caller is who sent an admitted request and the class it was admitted as
// (already clamped to the principal's ceiling).
type Caller struct {
	Principal string
	Class     priority.Class
	// Ceiling is the highest class the principal may claim.
	Ceiling priority.Class
}

// Request is an admitted request handed to a Handler.
type Request struct {
	// Op is the operation token, e.g. "claim".
	Op string
	// Graph is the graph token for edict.eg requests, "" otherwise.
	Graph  string
	Caller Caller
	Body   []byte
}

// Handler serves one admitted request. It runs on its own goroutine under
// ctx, which carries the request's class (priority.With) and the dispatch
// deadline; it returns the reply value to encode as JSON, or an error (an
// *Error for a protocol error; anything else becomes 500).
type Handler interface {
	// Ops lists the operations the handler serves.
	Ops() []string
	// Handle serves one request for an op from Ops.
	Handle(ctx context.Context, req Request) (any, error)
}

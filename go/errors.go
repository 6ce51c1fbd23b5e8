package densewire

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Category is an error category of SPEC.md section 11. A Category is itself an error value, so that
// errors.Is(err, densewire.Truncated) tells whether err is (or wraps) an *Error of that category.
// Errors decoded from a server may carry a code outside this list; it is kept as given.
type Category string

// The error categories of SPEC.md section 11.
const (
	InvalidBase64        Category = "invalid_base64"
	LengthMismatch       Category = "length_mismatch"
	ShapeMismatch        Category = "shape_mismatch"
	UnknownDType         Category = "unknown_dtype"
	Truncated            Category = "truncated"
	Malformed            Category = "malformed"
	InvalidField         Category = "invalid_field"
	NonFinite            Category = "non_finite"
	Unauthorized         Category = "unauthorized"
	NotFound             Category = "not_found"
	PayloadTooLarge      Category = "payload_too_large"
	UnsupportedMediaType Category = "unsupported_media_type"
	NotAcceptable        Category = "not_acceptable"
	Unavailable          Category = "unavailable"
	// RateLimited is a server's 429 answer: its admission is full (densewire serve
	// --max-concurrent-requests); the client retries it (RetryPolicy). Whatever code the server's
	// envelope names, errors.Is(err, RateLimited) holds for a 429.
	RateLimited Category = "rate_limited"
)

// Error implements error, so that a Category can be a sentinel for errors.Is. It returns the
// category's name ("truncated"), which is also how fmt prints a Category.
func (c Category) Error() string { return string(c) }

// HTTPStatus is the status code of the category (SPEC.md section 11), 500 for an unknown one.
func (c Category) HTTPStatus() int {
	switch c {
	case InvalidBase64, LengthMismatch, ShapeMismatch, UnknownDType, Truncated, Malformed:
		return http.StatusBadRequest
	case InvalidField, NonFinite:
		return http.StatusUnprocessableEntity
	case Unauthorized:
		return http.StatusUnauthorized
	case NotFound:
		return http.StatusNotFound
	case PayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case UnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case NotAcceptable:
		return http.StatusNotAcceptable
	case Unavailable:
		return http.StatusServiceUnavailable
	case RateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// categoryForStatus maps an HTTP status to a category, for error responses that carry no code.
func categoryForStatus(status int) Category {
	switch status {
	case http.StatusBadRequest:
		return Malformed
	case http.StatusUnprocessableEntity:
		return InvalidField
	case http.StatusUnauthorized, http.StatusForbidden:
		return Unauthorized
	case http.StatusNotFound:
		return NotFound
	case http.StatusRequestEntityTooLarge:
		return PayloadTooLarge
	case http.StatusUnsupportedMediaType:
		return UnsupportedMediaType
	case http.StatusNotAcceptable:
		return NotAcceptable
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return Unavailable
	case http.StatusTooManyRequests:
		return RateLimited
	}
	return Category("http_" + strconv.Itoa(status))
}

// Error is the error type of every densewire function. Use errors.As to get at it, or errors.Is
// with a Category to test its category.
type Error struct {
	Category Category // what went wrong (SPEC.md section 11)
	Message  string   // what was wrong, for people
	Field    string   // where: a JSON path (data[3].embedding), a MessagePack/Protobuf field or an HTTP header; "" if none
	Offset   int      // where: characters of a Base64 string or bytes of a body; -1 if none
	Status   int      // the HTTP status when the error is a server's answer; 0 otherwise
	Err      error    // the underlying cause, if any
	Attempts int      // how many times a Client sent the request (retries included); 0 for no request
	// RetryAfter is the Retry-After of a 429 or 503 answer (0 if none): a Client gives up at once on
	// one over MaxRetryAfter (SPEC.md 18.2), and this says when to come back.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("densewire: ")
	if e.Status != 0 {
		b.WriteString("server answered ")
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteString(" ")
		b.WriteString(string(e.Category))
		b.WriteString(": ")
	} else if e.Field != "" && !strings.HasPrefix(e.Message, e.Field+":") {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Message != "" {
		b.WriteString(e.Message)
	} else {
		b.WriteString(string(e.Category))
	}
	if e.Attempts == 1 {
		b.WriteString(" (1 attempt)")
	} else if e.Attempts > 1 {
		b.WriteString(" (" + strconv.Itoa(e.Attempts) + " attempts)")
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's Category, so that errors.Is(err, densewire.Malformed) works.
func (e *Error) Is(target error) bool {
	c, ok := target.(Category)
	return ok && (c == e.Category || c == RateLimited && e.Status == http.StatusTooManyRequests)
}

// HTTPStatus is the status to answer this error with: Status if set, else the category's.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.Category.HTTPStatus()
}

func newError(c Category, field string, offset int, msg string) *Error {
	return &Error{Category: c, Field: field, Offset: offset, Message: msg}
}

func lengthMismatch(field string, actual, expected int) *Error {
	off := min(actual, expected)
	return newError(LengthMismatch, field, off, "data is "+strconv.Itoa(actual)+" bytes, the shape needs "+
		strconv.Itoa(expected)+" (first missing or excess byte at offset "+strconv.Itoa(off)+")")
}

// withField returns err with field set when it has none (errors from nested decoders).
func withField(err *Error, field string) *Error {
	if err.Field == "" {
		err.Field = field
	}
	return err
}

// asError returns a decoder's result as (value, error): a nil *Error must not become a non-nil
// error interface.
func asError[T any](v T, e *Error) (T, error) {
	if e != nil {
		var zero T
		return zero, e
	}
	return v, nil
}

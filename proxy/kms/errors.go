// Errors: one line each, with a kind for errors.Is.

package kms

import (
	"errors"
	"strings"
)

// The kinds of failure.  An *Error matches its kind with errors.Is.
var (
	// ErrUnreachable: no connection to the KMS (refused, no route, a name
	// that does not resolve).
	ErrUnreachable = errors.New("KMS unreachable")
	// ErrTLS: the KMS's certificate is not trusted, or the KMS refused
	// the TLS handshake (a client certificate it does not accept).
	ErrTLS = errors.New("TLS failed")
	// ErrDenied: the KMS refused the token (wrong, expired, revoked, or
	// without a policy for the path).
	ErrDenied = errors.New("permission denied")
	// ErrNotFound: no such secret, version, field, Transit key or mount.
	ErrNotFound = errors.New("not found")
	// ErrTimeout: no answer within the timeout.
	ErrTimeout = errors.New("timed out")
	// ErrBadKey: what the KMS holds or returned is not a 256-bit key.
	ErrBadKey = errors.New("not a 256-bit key")
	// ErrUnsafeFile: a token or private key file that others can read or
	// that is not the caller's own.
	ErrUnsafeFile = errors.New("unsafe file")
	// ErrExists: WriteNewFile's file exists already.
	ErrExists = errors.New("file exists")
)

// Error is a failure of this package: Msg is the whole message, one line
// that never holds a secret; Kind is one of the Err values above or nil;
// Err is the cause, if any, for errors.As.
type Error struct {
	Kind error
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap gives errors.Is and errors.As the kind and the cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// newError makes an *Error whose message is msg made one line.
func newError(kind error, cause error, msg string) *Error {
	return &Error{Kind: kind, Msg: oneLine(msg), Err: cause}
}

// oneLine joins the lines of s with "; " and drops empty ones.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

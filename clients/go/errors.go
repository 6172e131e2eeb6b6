// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
)

// Sentinels, one per refusal reason (docs/api.md), plus the infrastructure
// channel and the tier re-check. Match them with errors.Is; the error
// itself is an *Error (or a *SessionEndedError) with the details.
var (
	ErrInvalidRequest        = errors.New("plimsoll: invalid request")
	ErrUnauthenticated       = errors.New("plimsoll: unauthenticated")
	ErrDisabled              = errors.New("plimsoll: disabled")
	ErrInsufficientIsolation = errors.New("plimsoll: insufficient isolation")
	ErrUnsupported           = errors.New("plimsoll: unsupported")
	ErrCallerNotAllowed      = errors.New("plimsoll: caller not allowed")
	ErrNotReady              = errors.New("plimsoll: not ready")
	ErrShuttingDown          = errors.New("plimsoll: shutting down")
	ErrRateLimited           = errors.New("plimsoll: rate limited")
	ErrAtCapacity            = errors.New("plimsoll: at capacity")
	ErrSessionEnded          = errors.New("plimsoll: session ended")
	ErrNotFound              = errors.New("plimsoll: not found")
	// ErrWrongRoute: the call named another daemon's route (a Session's,
	// or OnRoute's), so the session's own daemon was not reached: behind a
	// proxy, that daemon is gone or draining. Nothing ran.
	ErrWrongRoute = errors.New("plimsoll: wrong route")
	// ErrInfrastructure: the daemon answered INTERNAL, the exchange failed
	// or ran past its deadline (the code may have run: Dispatched is true;
	// code "deadline_exceeded" for the deadline), or the answer breaks the
	// protocol (ErrProtocol).
	ErrInfrastructure = errors.New("plimsoll: infrastructure error")
	// ErrProtocol: an answer the protocol does not allow (docs/clients.md,
	// "What a client reads"): longer than the client's cap, a 200 that is
	// not application/json, not JSON in UTF-8, nested past 64, a member
	// twice, a number that is not an integer of at most 2^53-1, a known
	// member of the wrong type, an error answer that is not a Connect
	// error. It also matches ErrInfrastructure (the code may have run).
	ErrProtocol = errors.New("plimsoll: protocol error")
	// ErrIsolationEvidenceMismatch: the request set a floor and the 200
	// answer's isolation, or its record's, is below it. The code may have
	// run; it is never retried automatically.
	ErrIsolationEvidenceMismatch = errors.New("plimsoll: isolation evidence mismatch")
	// ErrConfiguration: the client's own settings are wrong (NewClient's
	// error; docs/clients.md, "Configuration"): a URL that is not one, a
	// key that cannot be sent (the message says what, never the key), or
	// a key file (PLIMSOLL_KEY_FILE) that cannot be read or holds no key
	// (Metadata["path"] names it; the OS's error is wrapped, so
	// errors.Is(err, fs.ErrNotExist) works). Code invalid_argument;
	// nothing was sent.
	ErrConfiguration = errors.New("plimsoll: configuration error")
)

// Reasons that are not the daemon's: what Error.Reason holds for errors the
// client decides itself.
const (
	// ReasonInternal is the daemon's INTERNAL reason.
	ReasonInternal = "INTERNAL"
	// ReasonTransport: the HTTP exchange failed or its answer could not be
	// read as a Connect error or a result.
	ReasonTransport = "TRANSPORT"
	// ReasonIsolationEvidenceMismatch: the tier re-check failed.
	ReasonIsolationEvidenceMismatch = "ISOLATION_EVIDENCE_MISMATCH"
	// ReasonProtocol: the answer breaks the protocol (ErrProtocol).
	ReasonProtocol = "PROTOCOL"
	// ReasonConfiguration: the client's settings are wrong (ErrConfiguration).
	ReasonConfiguration = "CONFIGURATION"
)

var sentinels = map[string]error{
	"INVALID_REQUEST":               ErrInvalidRequest,
	"UNAUTHENTICATED":               ErrUnauthenticated,
	"DISABLED":                      ErrDisabled,
	"INSUFFICIENT_ISOLATION":        ErrInsufficientIsolation,
	"UNSUPPORTED":                   ErrUnsupported,
	"CALLER_NOT_ALLOWED":            ErrCallerNotAllowed,
	"NOT_READY":                     ErrNotReady,
	"SHUTTING_DOWN":                 ErrShuttingDown,
	"RATE_LIMITED":                  ErrRateLimited,
	"AT_CAPACITY":                   ErrAtCapacity,
	"SESSION_ENDED":                 ErrSessionEnded,
	"NOT_FOUND":                     ErrNotFound,
	"WRONG_ROUTE":                   ErrWrongRoute,
	ReasonInternal:                  ErrInfrastructure,
	ReasonTransport:                 ErrInfrastructure,
	ReasonProtocol:                  ErrProtocol,
	ReasonIsolationEvidenceMismatch: ErrIsolationEvidenceMismatch,
	ReasonConfiguration:             ErrConfiguration,
}

// Error is a refusal, an infrastructure error or a tier mismatch. It
// matches (errors.Is) the sentinel of its Reason; an unknown reason matches
// none of them.
type Error struct {
	// Reason is the ErrorInfo reason (RATE_LIMITED, …), or ReasonTransport,
	// or ReasonIsolationEvidenceMismatch.
	Reason string
	// Code is the Connect code ("resource_exhausted", …); "unavailable" for
	// a failed exchange, "data_loss" for a tier mismatch.
	Code string
	// Message is the daemon's message, or the client's.
	Message string
	// Dispatched says whether the code may have run: metadata.dispatched for
	// the daemon's errors, true for a failed exchange and a tier mismatch.
	Dispatched bool
	// Metadata is the ErrorInfo metadata; "isolation" is the daemon's tier.
	// For a tier mismatch: "minimum_isolation", "isolation" (the answer's)
	// and "record_isolation".
	Metadata map[string]string
	// HTTPStatus is the answer's status; 0 when no answer came.
	HTTPStatus int

	cause error
}

func (e *Error) Error() string {
	s := "plimsoll: "
	if e.Reason != "" {
		s += e.Reason + " "
	}
	if e.Code != "" {
		s += "(" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.cause != nil && e.Message == "" {
		s += ": " + e.cause.Error()
	}
	return s
}

// Is matches the sentinel of the error's reason; a protocol error matches
// ErrInfrastructure too.
func (e *Error) Is(target error) bool {
	if e.Reason == ReasonProtocol && target == ErrInfrastructure {
		return true
	}
	s, ok := sentinels[e.Reason]
	return ok && s == target
}

// Unwrap gives the transport error, if any (so errors.Is(err,
// context.DeadlineExceeded) works).
func (e *Error) Unwrap() error { return e.cause }

// SessionEndedError is the SESSION_ENDED refusal: the session ended, and
// Reason says why (lifetime, disk budget, closed, …).
type SessionEndedError struct {
	// Reason is metadata.ended_reason, or the message when that is absent.
	Reason string
	// Err is the refusal itself.
	Err *Error
}

func (e *SessionEndedError) Error() string {
	return "plimsoll: session ended: " + e.Reason
}

// Is matches ErrSessionEnded.
func (e *SessionEndedError) Is(target error) bool { return target == ErrSessionEnded }

// Unwrap gives the *Error.
func (e *SessionEndedError) Unwrap() error { return e.Err }

func transportError(err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	code := "unavailable"
	if errors.Is(err, context.DeadlineExceeded) {
		code = "deadline_exceeded"
	}
	return &Error{Reason: ReasonTransport, Code: code, Message: msg, Dispatched: true, cause: err}
}

// deadlineError is the timeout error: the call's context ended (its
// deadline, or the caller's) before the answer was read and decoded.
func deadlineError(ctx context.Context, method, what string) *Error {
	return transportError(ctx.Err(), "%s: no whole answer before the call's context ended (%s); the code may have run", method, what)
}

// protocolError is an answer the protocol does not allow.
func protocolError(method string, status int, why error) *Error {
	return &Error{
		Reason: ReasonProtocol, Code: "unknown", HTTPStatus: status, Dispatched: true,
		Message: fmt.Sprintf("%s: HTTP %d with an answer that breaks the protocol: %v; the code may have run", method, status, why),
		cause:   why,
	}
}

// decodeError turns a non-200 answer into an error: a refusal,
// infrastructure, or a protocol error when it is not a Connect error. ctx
// bounds the decoding.
func decodeError(ctx context.Context, method string, status int, body []byte) error {
	v, err := parseAnswer(ctx, body)
	if err == nil {
		err = checkShape(v, connectErrorShape, "the error")
	}
	if err != nil {
		if ctx.Err() != nil {
			return deadlineError(ctx, method, "still decoding the error")
		}
		return protocolError(method, status, fmt.Errorf("not a Connect error (%w)", err))
	}
	ce := v.(map[string]any)
	code, _ := ce["code"].(string)
	if code == "" {
		return protocolError(method, status, errors.New("not a Connect error (it has no code)"))
	}
	msg, _ := ce["message"].(string)
	e := &Error{Code: code, Message: msg, HTTPStatus: status, Metadata: map[string]string{}}
	details, _ := ce["details"].([]any)
	for _, x := range details {
		d, _ := x.(map[string]any)
		if t, _ := d["type"].(string); t != "" && t != "google.rpc.ErrorInfo" {
			continue
		}
		debug, _ := d["debug"].(map[string]any)
		if r, _ := debug["reason"].(string); r != "" {
			e.Reason = r
			md, _ := debug["metadata"].(map[string]any)
			for k, val := range md {
				if s, ok := val.(string); ok {
					e.Metadata[k] = s
				}
			}
		} else if value, _ := d["value"].(string); value != "" {
			if r, md, ok := parseErrorInfo(value); ok {
				e.Reason = r
				for k, val := range md {
					e.Metadata[k] = val
				}
			}
		}
		if e.Reason != "" {
			break
		}
	}
	switch e.Reason {
	case "":
		// A Connect error without an ErrorInfo: not one of plimsoll's.
		e.Reason = ReasonTransport
		e.Dispatched = true
		if e.Message == "" {
			e.Message = fmt.Sprintf("HTTP %d, Connect code %s, without a reason", status, code)
		}
		return e
	case ReasonInternal:
		// The code may have run unless the daemon says otherwise.
		e.Dispatched = e.Metadata["dispatched"] != "false"
	default:
		e.Dispatched = e.Metadata["dispatched"] == "true"
	}
	if e.Reason == "SESSION_ENDED" {
		why := e.Metadata["ended_reason"]
		if why == "" {
			why = e.Message
		}
		if why == "" {
			why = "ended"
		}
		return &SessionEndedError{Reason: why, Err: e}
	}
	return e
}

// parseErrorInfo reads a google.rpc.ErrorInfo from its protobuf encoding
// (base64, padded or not): reason = 1, domain = 2, metadata = 3 (map
// entries of key = 1, value = 2).
func parseErrorInfo(value string) (string, map[string]string, bool) {
	b, err := base64.RawStdEncoding.DecodeString(trimPad(value))
	if err != nil || len(b) == 0 {
		return "", nil, false
	}
	reason := ""
	md := map[string]string{}
	ok := walkProto(b, func(field int, v []byte) bool {
		switch field {
		case 1:
			reason = string(v)
		case 3:
			var k, val string
			if !walkProto(v, func(f int, x []byte) bool {
				if f == 1 {
					k = string(x)
				} else if f == 2 {
					val = string(x)
				}
				return true
			}) {
				return false
			}
			md[k] = val
		}
		return true
	})
	return reason, md, ok && reason != ""
}

func trimPad(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}

// walkProto calls fn with each length-delimited field; other wire types are
// skipped. It returns false on malformed input.
func walkProto(b []byte, fn func(field int, v []byte) bool) bool {
	varint := func() (uint64, bool) {
		var x uint64
		for s := uint(0); s < 64; s += 7 {
			if len(b) == 0 {
				return 0, false
			}
			c := b[0]
			b = b[1:]
			x |= uint64(c&0x7f) << s
			if c < 0x80 {
				return x, true
			}
		}
		return 0, false
	}
	for len(b) > 0 {
		key, ok := varint()
		if !ok {
			return false
		}
		switch key & 7 {
		case 0:
			if _, ok := varint(); !ok {
				return false
			}
		case 1:
			if len(b) < 8 {
				return false
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return false
			}
			b = b[4:]
		case 2:
			n, ok := varint()
			if !ok || n > uint64(len(b)) {
				return false
			}
			v := b[:n]
			b = b[n:]
			if !fn(int(key>>3), v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

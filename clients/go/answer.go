// SPDX-License-Identifier: Apache-2.0
package plimsoll

// What an answer may be (docs/clients.md, "What a client reads"): JSON
// text in UTF-8, no deeper than MaxAnswerDepth, no member twice, integers
// only and none past MaxAnswerInteger, and the known members of each
// message of their proto type. Anything else is a protocol error
// (ErrProtocol).
//
// encoding/json takes invalid UTF-8 and lone surrogates (it writes U+FFFD),
// keeps the last of two members of one name and nests 10000 deep: a scan
// of the bytes catches those first, then the decoder builds the value.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"plimsoll/record"
)

// DefaultMaxAnswerBytes caps one answer's body unless WithMaxAnswerBytes
// says otherwise: 256 MiB, the same in every official client.
const DefaultMaxAnswerBytes = 256 << 20

// MaxAnswerDepth is how deep objects and arrays may nest in an answer, the
// answer itself counting 1.
const MaxAnswerDepth = 64

// MaxAnswerInteger is the largest magnitude of a number in an answer
// (2^53-1, which every official client holds exactly).
const MaxAnswerInteger = 1<<53 - 1

// malformed is an answer that breaks the rules above.
type malformed struct{ why string }

func (m *malformed) Error() string { return m.why }

func bad(format string, args ...any) error { return &malformed{fmt.Sprintf(format, args...)} }

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n), err == nil
}

// escapedUnit is the code unit of the \uXXXX escape at data[i] (the
// backslash).
func escapedUnit(data []byte, i int) (rune, error) {
	if i+1 >= len(data) || data[i+1] != 'u' {
		return 0, bad("a bad \\u escape")
	}
	u, ok := hex4(data[i+2:])
	if !ok {
		return 0, bad("a bad \\u escape")
	}
	return u, nil
}

var largest = strconv.Itoa(MaxAnswerInteger)

// scan checks an answer's bytes: UTF-8, depth, duplicate members, number
// lexemes, lone surrogates. It is not a grammar check: the decoder is.
// ctx is checked every MiB.
func scan(ctx context.Context, data []byte) error {
	if !utf8.Valid(data) {
		return bad("not UTF-8")
	}
	const stride = 1 << 20
	next := stride
	var open []map[string]bool // per open container: member names, or nil for an array
	n := len(data)
	tick := func(i int) error {
		next = i + stride
		return ctx.Err()
	}
	for i := 0; i < n; {
		if i >= next {
			if err := tick(i); err != nil {
				return err
			}
		}
		c := data[i]
		switch {
		case c == '"':
			start := i
			i++
			escapes := false
			for {
				if i >= n {
					return bad("a string does not end")
				}
				if i >= next {
					if err := tick(i); err != nil {
						return err
					}
				}
				d := data[i]
				if d == '"' {
					break
				}
				if d != '\\' {
					i++
					continue
				}
				escapes = true
				if i+1 < n && data[i+1] != 'u' {
					i += 2
					continue
				}
				u, err := escapedUnit(data, i)
				if err != nil {
					return err
				}
				switch {
				case u >= 0xd800 && u <= 0xdbff:
					low := rune(-1)
					if i+6 < n && data[i+6] == '\\' {
						if low, err = escapedUnit(data, i+6); err != nil {
							return err
						}
					}
					if low < 0xdc00 || low > 0xdfff {
						return bad("a string holds a lone surrogate")
					}
					i += 12
				case u >= 0xdc00 && u <= 0xdfff:
					return bad("a string holds a lone surrogate")
				default:
					i += 6
				}
			}
			end := i
			i++
			if len(open) == 0 || open[len(open)-1] == nil {
				continue
			}
			k := i
			for k < n && isSpace(data[k]) {
				k++
			}
			if k >= n || data[k] != ':' {
				continue
			}
			name := string(data[start+1 : end])
			if escapes {
				if err := json.Unmarshal(data[start:end+1], &name); err != nil {
					return bad("a member name is not a JSON string")
				}
			}
			names := open[len(open)-1]
			if names[name] {
				if len(name) > 40 {
					name = name[:40]
				}
				return bad("the member %q appears twice", name)
			}
			names[name] = true
		case c == '{' || c == '[':
			if c == '{' {
				open = append(open, map[string]bool{})
			} else {
				open = append(open, nil)
			}
			if len(open) > MaxAnswerDepth {
				return bad("nested deeper than %d", MaxAnswerDepth)
			}
			i++
		case c == '}' || c == ']':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
			i++
		case c == '-' || (c >= '0' && c <= '9'):
			start := i
			for i++; i < n; i++ {
				d := data[i]
				if !(d >= '0' && d <= '9' || d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-') {
					break
				}
			}
			if err := integerLexeme(string(data[start:i])); err != nil {
				return err
			}
		default:
			i++
		}
	}
	return nil
}

func integerLexeme(s string) error {
	digits := strings.TrimPrefix(s, "-")
	short := s
	if len(short) > 40 {
		short = short[:40]
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" || (len(digits) > 1 && digits[0] == '0') {
		return bad("a number that is not an integer (%s)", short)
	}
	if len(digits) > len(largest) || (len(digits) == len(largest) && digits > largest) {
		return bad("the integer %s is past 2^53-1", short)
	}
	return nil
}

// parseAnswer is the JSON value of an answer's body (numbers as
// json.Number), or a *malformed, or ctx's error.
func parseAnswer(ctx context.Context, data []byte) (any, error) {
	if err := scan(ctx, data); err != nil {
		return nil, err
	}
	v, err := record.Parse(data)
	if err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	return v, nil
}

// ---- the messages' shapes (proto/plimsoll/v1/sandbox.proto) ---------------

type kind int

const (
	kString kind = iota
	kBool
	kInt32
	kUint32
	kMessage
	kAny
	kStringMap // a proto map<string, string>: an object of strings
)

var kindNames = map[kind]string{kString: "a string", kBool: "a bool", kInt32: "an int32", kUint32: "a uint32"}

// field is a member's type: a scalar, a message (sub), repeated or not.
type field struct {
	kind     kind
	sub      shape
	repeated bool
}

type shape map[string]field

var (
	fString  = field{kind: kString}
	fBool    = field{kind: kBool}
	fInt32   = field{kind: kInt32}
	fUint32  = field{kind: kUint32}
	fStrings = field{kind: kString, repeated: true}

	usageShape = field{kind: kMessage, sub: shape{
		"cpu_user_ms": fUint32, "cpu_system_ms": fUint32, "memory_peak_kib": fUint32,
		"wall_ms": fUint32, "source": fString,
	}}
	displayOutputShape = shape{"kind": fString, "data": {kind: kStringMap}}
	stepResultShape    = shape{
		"name": fString, "exit_code": fInt32, "stdout": fString, "stderr": fString,
		"stdout_truncated": fBool, "stderr_truncated": fBool, "duration_ms": fUint32,
		"timed_out": fBool, "stdout_base64": fString, "stderr_base64": fString,
		"usage": usageShape,
	}
	runRecordShape = shape{
		"version": fInt32, "request_sha256": fString, "response_sha256": fString,
		"provider": fString, "isolation": fString, "runtime": fString, "started_at": fString,
		"ended_at": fString, "previous_digest": fString, "digest": fString,
		"broker_calls": fUint32, "broker_refused": fUint32,
	}
	runResponseShape = shape{
		"exit_code": fInt32, "stdout": fString, "stderr": fString, "stdout_truncated": fBool,
		"stderr_truncated": fBool, "duration_ms": fUint32, "sandbox_name": fString,
		"isolation": fString, "timed_out": fBool, "out_of_memory": fBool, "outcome": fString,
		"detail": fString, "steps": {kind: kMessage, sub: stepResultShape, repeated: true},
		"record": {kind: kMessage, sub: runRecordShape}, "stdout_base64": fString,
		"stderr_base64": fString, "interpreter_started": fBool,
		"artifacts": {kind: kMessage, sub: artifactShape, repeated: true}, "artifacts_truncated": fBool,
		"outputs":         {kind: kMessage, sub: displayOutputShape, repeated: true},
		"outputs_dropped": fUint32, "usage": usageShape, "usage_absent": fString,
	}
	artifactShape = shape{
		"path": fString, "path_base64": fString, "size": fUint32, "content": fString,
		"content_base64": fString, "truncated": fBool,
	}
	operationShape = field{kind: kMessage, sub: shape{
		"supported": fBool, "engine": fString, "max_timeout_ms": fUint32, "languages": fStrings,
		"grants": fBool, "streams": fBool,
	}}
	describeResponseShape = shape{
		"version": fString, "provider": fString, "isolation": fString, "runtime": fString,
		"ready": fBool, "ready_detail": fString, "supports_sessions": fBool, "languages": fStrings,
		"operations": {kind: kMessage, sub: shape{
			"snippet": operationShape, "project": operationShape, "module": operationShape,
			"session": operationShape, "files": operationShape,
			"artifacts": {kind: kMessage, sub: shape{"project": fBool, "snippet": fBool}},
			"display": {kind: kMessage, sub: shape{
				"python": fBool, "javascript": fBool, "matplotlib": fBool, "pandas": fBool,
			}},
		}},
		"limits": {kind: kMessage, sub: shape{
			"memory_mb": fUint32, "total_memory_mb": fUint32, "max_concurrent": fUint32,
			"effective_concurrency": fUint32, "per_key_concurrent": fUint32,
			"rate_per_min": fUint32, "rate_burst": fUint32, "default_timeout_ms": fUint32,
			"output_bytes": fUint32, "max_snippet_bytes": fUint32, "max_request_bytes": fUint32,
			"memory_budget_applies": fBool, "min_memory_mb": fUint32, "file_read_bytes": fUint32,
			"file_list_entries": fUint32, "session_max_lifetime_s": fUint32,
			"collect_files": fUint32, "collect_bytes": fUint32, "display_outputs": fUint32,
			"display_output_bytes": fUint32, "display_bytes": fUint32,
		}},
	}
	fileEntryShape = shape{
		"path": fString, "path_base64": fString, "type": fString, "size": fUint32,
		"mode": fUint32, "modified_at": fString,
	}
	sessionInterpreterShape = shape{"language": fString, "alive": fBool}
	sessionInfoShape        = shape{
		"session_id": fString, "state": fString, "ended_reason": fString, "created_at": fString,
		"last_call_at": fString, "idle_deadline": fString, "lifetime_deadline": fString,
		"ended_at": fString, "calls": fUint32, "calls_waiting": fUint32, "previous_digest": fString,
		"languages": fStrings, "interpreters": {kind: kMessage, sub: sessionInterpreterShape, repeated: true},
		"disk_used_kib": fUint32, "disk_budget_kib": fUint32, "max_lifetime_s": fUint32,
		"route": fString,
	}
	// responseShapes is the 200 answer of each method.
	responseShapes = map[string]shape{
		"Describe": describeResponseShape, "Run": runResponseShape,
		"RunInSession": runResponseShape, "RunCell": runResponseShape,
		"OpenSession": {"session_id": fString, "route": fString}, "CloseSession": {},
		"ListSessions":  {"sessions": {kind: kMessage, sub: sessionInfoShape, repeated: true}},
		"GetSession":    sessionInfoShape,
		"ExtendSession": sessionInfoShape,
		"WriteFiles":    {"files": fUint32, "bytes": fUint32, "record": {kind: kMessage, sub: runRecordShape}},
		"ReadFile": {
			"path": fString, "size": fUint32, "offset": fUint32, "content": fString,
			"content_base64": fString, "length": fUint32, "more": fBool,
			"record": {kind: kMessage, sub: runRecordShape},
		},
		"ListFiles": {
			"entries": {kind: kMessage, sub: fileEntryShape, repeated: true}, "truncated": fBool,
			"record": {kind: kMessage, sub: runRecordShape},
		},
	}
	// answerChecks is what an answer must hold beyond its members' types
	// (checkShape), for the methods whose values have a form.
	answerChecks = map[string]func(m map[string]any, where string) error{
		"ListSessions": func(m map[string]any, where string) error {
			list, _ := m["sessions"].([]any)
			for i, x := range list {
				if _, err := sessionInfoOf(x.(map[string]any), fmt.Sprintf("%s.sessions[%d]", where, i)); err != nil {
					return err
				}
			}
			return nil
		},
		"GetSession":    checkSessionInfo,
		"ExtendSession": checkSessionInfo,
		"ReadFile":      checkReadFile,
		"ListFiles":     checkListFiles,
		"Run":           checkRun,
		"RunInSession":  checkRun,
		"RunCell":       checkRun,
	}
	// connectErrorShape is what of a Connect error is checked; its details
	// are read leniently.
	connectErrorShape = shape{
		"code": fString, "message": fString, "details": {kind: kAny, repeated: true},
	}
)

func checkScalar(v any, k kind, where string) error {
	ok := false
	switch k {
	case kAny:
		return nil
	case kStringMap:
		m, isMap := v.(map[string]any)
		if !isMap {
			return bad("%s is not an object", where)
		}
		for k, x := range m {
			if _, isString := x.(string); !isString {
				if len(k) > 40 {
					k = k[:40]
				}
				return bad("%s[%q] is not a string", where, k)
			}
		}
		return nil
	case kString:
		_, ok = v.(string)
	case kBool:
		_, ok = v.(bool)
	case kInt32, kUint32:
		if num, isNum := v.(json.Number); isNum {
			x, err := strconv.ParseInt(string(num), 10, 64)
			if k == kInt32 {
				ok = err == nil && x >= -1<<31 && x <= 1<<31-1
			} else {
				ok = err == nil && x >= 0 && x <= 1<<32-1
			}
		}
	}
	if !ok {
		return bad("%s is not %s", where, kindNames[k])
	}
	return nil
}

func checkValue(v any, f field, where string) error {
	if f.kind == kMessage {
		return checkShape(v, f.sub, where)
	}
	return checkScalar(v, f.kind, where)
}

// checkShape: v is an object whose known members have their types (null is
// the default, as proto3 JSON says).
func checkShape(v any, s shape, where string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return bad("%s is not an object", where)
	}
	for name, f := range s {
		x, present := m[name]
		if !present || x == nil {
			continue
		}
		at := where + "." + name
		if !f.repeated {
			if err := checkValue(x, f, at); err != nil {
				return err
			}
			continue
		}
		arr, ok := x.([]any)
		if !ok {
			return bad("%s is not an array", at)
		}
		for i, e := range arr {
			if e == nil {
				return bad("%s[%d] is null", at, i)
			}
			if err := checkValue(e, f, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAnswer checks a 200 answer of method, already a JSON value: its
// members' types, then what answerChecks says of it.
func checkAnswer(v any, method string) error {
	if err := checkShape(v, responseShapes[method], method); err != nil {
		return err
	}
	if check := answerChecks[method]; check != nil {
		return check(v.(map[string]any), method)
	}
	return nil
}

// ---- a run's display outputs ---------------------------------------------

// checkDisplay checks what a display output's shape cannot say: a kind of
// DisplayKindDisplay or DisplayKindResult, and the data of each type that
// is not text (MimeIsText) base64.
func checkDisplay(d map[string]any, where string) error {
	kind, _ := d["kind"].(string)
	if kind != DisplayKindDisplay && kind != DisplayKindResult {
		if len(kind) > 40 {
			kind = kind[:40]
		}
		return bad("%s.kind is %q, not display or result", where, kind)
	}
	data, _ := d["data"].(map[string]any)
	for mime, v := range data {
		if MimeIsText(mime) {
			continue
		}
		if _, ok := decodeBase64(v.(string)); !ok {
			if len(mime) > 40 {
				mime = mime[:40]
			}
			return bad("%s.data[%q] is not base64", where, mime)
		}
	}
	return nil
}

// checkRun checks a RunResponse's display outputs.
func checkRun(m map[string]any, where string) error {
	outputs, _ := m["outputs"].([]any)
	for i, x := range outputs {
		if err := checkDisplay(x.(map[string]any), fmt.Sprintf("%s.outputs[%d]", where, i)); err != nil {
			return err
		}
	}
	return nil
}

// ---- SessionInfo: the forms of its values ---------------------------------

// isDigest: 64 lowercase hex digits, the form of a session id and of a
// record's digest.
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// instant reads an RFC 3339 instant; "" is the zero time (none).
func instant(m map[string]any, name, where string) (time.Time, error) {
	s, _ := m[name].(string)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if len(s) > 40 {
			s = s[:40]
		}
		return time.Time{}, bad("%s.%s is not an RFC 3339 instant (%q)", where, name, s)
	}
	return t.UTC(), nil
}

func uint32Of(m map[string]any, name string) uint32 {
	n, _ := m[name].(json.Number)
	x, _ := strconv.ParseUint(string(n), 10, 32)
	return uint32(x)
}

// checkSessionInfo checks a SessionInfo answer (GetSession, ExtendSession).
func checkSessionInfo(m map[string]any, where string) error {
	_, err := sessionInfoOf(m, where)
	return err
}

// sessionInfoOf is a SessionInfo of an object that passed its shape check,
// or why it cannot be one: a session_id that is not 64 hex digits (or is
// missing), a state other than ready, paused and ended, an instant that is
// not RFC 3339, a previous_digest that is neither "" nor 64 hex digits, a
// route that is neither "" nor one a daemon may have.
func sessionInfoOf(m map[string]any, where string) (SessionInfo, error) {
	str := func(name string) string { s, _ := m[name].(string); return s }
	info := SessionInfo{
		SessionID: str("session_id"), State: str("state"), EndedReason: str("ended_reason"),
		Calls: uint32Of(m, "calls"), CallsWaiting: uint32Of(m, "calls_waiting"),
		PreviousDigest: str("previous_digest"), DiskUsedKiB: uint32Of(m, "disk_used_kib"),
		DiskBudgetKiB: uint32Of(m, "disk_budget_kib"), MaxLifetimeS: uint32Of(m, "max_lifetime_s"),
		Route: str("route"),
	}
	if info.SessionID == "" {
		return info, bad("%s names no session (no session_id)", where)
	}
	if !isDigest(info.SessionID) {
		return info, bad("%s.session_id is not 64 hex digits", where)
	}
	switch info.State {
	case SessionReady, SessionPaused, SessionEnded:
	default:
		s := info.State
		if len(s) > 40 {
			s = s[:40]
		}
		return info, bad("%s.state is %q, not ready, paused or ended", where, s)
	}
	if info.PreviousDigest != "" && !isDigest(info.PreviousDigest) {
		return info, bad("%s.previous_digest is neither \"\" nor 64 hex digits", where)
	}
	if info.Route != "" && !validRoute(info.Route) {
		return info, bad("%s.route is not 1 to %d of [A-Za-z0-9._-]", where, MaxRouteLength)
	}
	for _, at := range []struct {
		name string
		t    *time.Time
	}{
		{"created_at", &info.CreatedAt}, {"last_call_at", &info.LastCallAt},
		{"idle_deadline", &info.IdleDeadline}, {"lifetime_deadline", &info.LifetimeDeadline},
		{"ended_at", &info.EndedAt},
	} {
		t, err := instant(m, at.name, where)
		if err != nil {
			return info, err
		}
		*at.t = t
	}
	langs, _ := m["languages"].([]any)
	for _, l := range langs {
		info.Languages = append(info.Languages, l.(string))
	}
	interps, _ := m["interpreters"].([]any)
	for _, x := range interps {
		im := x.(map[string]any)
		lang, _ := im["language"].(string)
		alive, _ := im["alive"].(bool)
		info.Interpreters = append(info.Interpreters, SessionInterpreter{Language: lang, Alive: alive})
	}
	return info, nil
}

// mediaTypeIsJSON: a Content-Type of application/json (any case), with a
// charset, if any, of UTF-8 (quoted or not); other parameters are ignored.
func mediaTypeIsJSON(v string) bool {
	parts := strings.Split(v, ";")
	if !strings.EqualFold(strings.TrimSpace(parts[0]), "application/json") {
		return false
	}
	for _, p := range parts[1:] {
		name, val, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "charset") {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		if !strings.EqualFold(val, "utf-8") {
			return false
		}
	}
	return true
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// ListSessions, GetSession, ExtendSession and ConnectSession against the
// fake daemon (client_test.go): what is sent, how the answers are read and
// checked, and what the client refuses before sending anything.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"plimsoll/record"
)

var (
	sidA = strings.Repeat("a1", 32)
	sidB = strings.Repeat("b2", 32)
)

// sessionInfoAnswer is a SessionInfo as the daemon writes it: every member,
// instants with 9 fraction digits or "".
func sessionInfoAnswer(id string) map[string]any {
	return map[string]any{
		"session_id": id, "state": "ready", "ended_reason": "",
		"created_at": "2026-11-30T01:02:03.000000001Z", "last_call_at": "2026-11-30T01:02:04.500000000Z",
		"idle_deadline": "", "lifetime_deadline": "2026-11-30T01:12:03.000000001Z", "ended_at": "",
		"calls": 2, "calls_waiting": 0, "previous_digest": strings.Repeat("0f", 32),
		"languages":     []any{"python"},
		"interpreters":  []any{map[string]any{"language": "python", "alive": true}, map[string]any{"language": "javascript", "alive": false}},
		"disk_used_kib": 300, "disk_budget_kib": 8192, "max_lifetime_s": 86400,
	}
}

func TestSessionCallsSendAndRead(t *testing.T) {
	ended := sessionInfoAnswer(sidB)
	ended["state"], ended["ended_reason"], ended["ended_at"] = "ended", "its owner closed it", "2026-11-30T02:00:00.123456789Z"
	ended["lifetime_deadline"], ended["previous_digest"], ended["calls"] = "", "", 0
	ended["unknown_member"] = "kept in Raw, ignored" // a later daemon's
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		switch {
		case strings.HasSuffix(path, "/ListSessions"):
			return 200, map[string]any{"sessions": []any{sessionInfoAnswer(sidA), ended}}
		case strings.HasSuffix(path, "/GetSession"):
			return 200, sessionInfoAnswer(sidA)
		case strings.HasSuffix(path, "/ExtendSession"):
			a := sessionInfoAnswer(sidA)
			a["lifetime_deadline"] = "2026-11-30T03:00:00.000000001Z"
			return 200, a
		}
		return 404, "no such call"
	})
	c := newClient(t, url)
	ctx := context.Background()
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("%v %+v", err, list)
	}
	got, err := c.GetSession(ctx, sidA)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := c.ExtendSession(ctx, sidA, 7200)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{}`, `{"session_id":"` + sidA + `"}`, `{"ends_in_s":7200,"session_id":"` + sidA + `"}`}
	for i, p := range []string{"ListSessions", "GetSession", "ExtendSession"} {
		if f.paths[i] != "/plimsoll.v1.SandboxService/"+p || f.bodies[i] != want[i] {
			t.Errorf("call %d: %s %s, want %s", i, f.paths[i], f.bodies[i], want[i])
		}
	}

	a := list[0]
	if a.SessionID != sidA || a.State != SessionReady || a.Ended() || a.EndedReason != "" ||
		a.Calls != 2 || a.CallsWaiting != 0 || a.PreviousDigest != strings.Repeat("0f", 32) ||
		a.DiskUsedKiB != 300 || a.DiskBudgetKiB != 8192 || a.MaxLifetimeS != 86400 ||
		len(a.Languages) != 1 || a.Languages[0] != "python" ||
		len(a.Interpreters) != 2 || a.Interpreters[0] != (SessionInterpreter{"python", true}) ||
		a.Interpreters[1] != (SessionInterpreter{"javascript", false}) {
		t.Fatalf("%+v", a)
	}
	if !a.CreatedAt.Equal(time.Date(2026, 11, 30, 1, 2, 3, 1, time.UTC)) || a.CreatedAt.Location() != time.UTC ||
		!a.LastCallAt.Equal(time.Date(2026, 11, 30, 1, 2, 4, 500000000, time.UTC)) ||
		!a.IdleDeadline.IsZero() || !a.EndedAt.IsZero() ||
		a.LifetimeDeadline.Sub(a.CreatedAt) != 10*time.Minute {
		t.Fatalf("instants %+v", a)
	}
	b := list[1]
	if !b.Ended() || b.EndedReason != "its owner closed it" || !b.LifetimeDeadline.IsZero() ||
		!b.EndedAt.Equal(time.Date(2026, 11, 30, 2, 0, 0, 123456789, time.UTC)) || b.PreviousDigest != "" ||
		!strings.Contains(string(b.Raw), `"unknown_member"`) || strings.Contains(string(a.Raw), "unknown") {
		t.Fatalf("%+v", b)
	}
	if got.SessionID != sidA || got.Calls != 2 || !json.Valid(got.Raw) {
		t.Fatalf("%+v", got)
	}
	if !ext.LifetimeDeadline.Equal(time.Date(2026, 11, 30, 3, 0, 0, 1, time.UTC)) {
		t.Fatalf("%+v", ext)
	}
}

func TestListSessionsEmptyAndDefaults(t *testing.T) {
	for _, answer := range []string{`{}`, `{"sessions":[]}`, `{"sessions":null}`} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) { return 200, answer })
		list, err := newClient(t, url).ListSessions(context.Background())
		if err != nil || len(list) != 0 || list == nil {
			t.Errorf("%s: %v %#v", answer, err, list)
		}
	}
	// Members left out or null are their defaults, as in proto3 JSON.
	_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		return 200, `{"session_id":"` + sidA + `","state":"paused","calls":null,"languages":null}`
	})
	info, err := newClient(t, url).GetSession(context.Background(), sidA)
	if err != nil || info.State != SessionPaused || info.Calls != 0 || !info.CreatedAt.IsZero() ||
		info.Languages != nil || info.Interpreters != nil {
		t.Fatalf("%v %+v", err, info)
	}
}

// Every malformed answer is the client's protocol error, for each method.
func TestSessionAnswersMalformed(t *testing.T) {
	with := func(name string, v any) func(map[string]any) {
		return func(m map[string]any) { m[name] = v }
	}
	for _, tc := range []struct {
		name   string
		mutate func(map[string]any)
	}{
		{"no session_id", func(m map[string]any) { delete(m, "session_id") }},
		{"empty session_id", with("session_id", "")},
		{"short session_id", with("session_id", "abc")},
		{"uppercase session_id", with("session_id", strings.ToUpper(sidA))},
		{"session_id a number", with("session_id", 7)},
		{"no state", func(m map[string]any) { delete(m, "state") }},
		{"unknown state", with("state", "running")},
		{"state a bool", with("state", true)},
		{"calls a string", with("calls", "2")},
		{"calls negative", with("calls", -1)},
		{"calls past uint32", with("calls", int64(1)<<32)},
		{"calls a fraction", with("calls", 1.5)},
		{"max_lifetime_s a string", with("max_lifetime_s", "86400")},
		{"disk_used_kib an object", with("disk_used_kib", map[string]any{})},
		{"created_at not a time", with("created_at", "yesterday")},
		{"ended_at a number", with("ended_at", 17)},
		{"lifetime_deadline without a zone", with("lifetime_deadline", "2026-11-30T01:12:03.000000001")},
		{"previous_digest not a digest", with("previous_digest", "abc")},
		{"languages a string", with("languages", "python")},
		{"languages of numbers", with("languages", []any{1})},
		{"languages holding null", with("languages", []any{nil})},
		{"interpreters an object", with("interpreters", map[string]any{})},
		{"interpreter alive a string", with("interpreters", []any{map[string]any{"language": "python", "alive": "yes"}})},
		{"interpreter a string", with("interpreters", []any{"python"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
				a := sessionInfoAnswer(sidA)
				tc.mutate(a)
				if strings.HasSuffix(path, "/ListSessions") {
					return 200, map[string]any{"sessions": []any{sessionInfoAnswer(sidB), a}}
				}
				return 200, a
			})
			c := newClient(t, url)
			ctx := context.Background()
			_, err := c.ListSessions(ctx)
			wantAnswerProtocol(t, "ListSessions", err)
			_, err = c.GetSession(ctx, sidA)
			wantAnswerProtocol(t, "GetSession", err)
			_, err = c.ExtendSession(ctx, sidA, 60)
			wantAnswerProtocol(t, "ExtendSession", err)
			_, err = c.ConnectSession(ctx, sidA, "")
			wantAnswerProtocol(t, "GetSession", err)
		})
	}
	for _, tc := range []struct{ name, list string }{
		{"sessions an object", `{"sessions":{}}`},
		{"sessions holding null", `{"sessions":[null]}`},
		{"sessions holding a string", `{"sessions":["` + sidA + `"]}`},
		{"not an object", `[]`},
		{"a member twice", `{"sessions":[],"sessions":[]}`},
	} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) { return 200, tc.list })
		_, err := newClient(t, url).ListSessions(context.Background())
		wantAnswerProtocol(t, tc.name, err)
	}
	// An answer about another session than the one asked for.
	_, url := newFake(t, func(n int, path string, body []byte) (int, any) { return 200, sessionInfoAnswer(sidB) })
	_, err := newClient(t, url).GetSession(context.Background(), sidA)
	wantAnswerProtocol(t, "another session", err)
	_, err = newClient(t, url).ExtendSession(context.Background(), sidA, 60)
	wantAnswerProtocol(t, "another session", err)
}

func wantAnswerProtocol(t *testing.T, what string, err error) {
	t.Helper()
	var e *Error
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrInfrastructure) || !errors.As(err, &e) ||
		e.Reason != ReasonProtocol || e.HTTPStatus != 200 {
		t.Errorf("%s: want the protocol error, got %v", what, err)
	}
}

// What the client refuses itself is ExtendSession's refusal, and nothing
// is sent.
func TestSessionCallsArgumentChecks(t *testing.T) {
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) { return 200, sessionInfoAnswer(sidA) })
	c := newClient(t, url)
	ctx := context.Background()
	_, err := c.ExtendSession(ctx, sidA, 0)
	if e := wantRefusal(t, err, ErrInvalidRequest); e.Dispatched || e.HTTPStatus != 0 || e.Code != "invalid_argument" ||
		!strings.Contains(e.Message, "ends_in_s") {
		t.Fatalf("%+v", e)
	}
	_, err = c.GetSession(ctx, "")
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = c.ExtendSession(ctx, "", 60)
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = c.ConnectSession(ctx, "", "")
	wantRefusal(t, err, ErrInvalidRequest)
	s := &Session{ID: sidA, c: c, chain: record.NewChain("")}
	_, err = s.Extend(ctx, 0)
	wantRefusal(t, err, ErrInvalidRequest)
	if _, err := c.ConnectSession(ctx, sidA, "sideways"); err == nil || errors.Is(err, ErrInfrastructure) {
		t.Fatalf("an unknown floor: %v", err)
	}
	if f.count() != 0 {
		t.Fatalf("%d calls were sent: %q", f.count(), f.bodies)
	}
	// The largest ends_in_s is sent as it is.
	if _, err := c.ExtendSession(ctx, sidA, 1<<32-1); err != nil || f.bodies[0] != `{"ends_in_s":4294967295,"session_id":"`+sidA+`"}` {
		t.Fatalf("%v %q", err, f.bodies)
	}
}

// The daemon's refusals reach the caller typed, as for every call.
func TestSessionCallsRefused(t *testing.T) {
	for _, tc := range []struct {
		status       int
		reason, code string
		md           map[string]string
		sentinel     error
	}{
		{404, "NOT_FOUND", "not_found", nil, ErrNotFound},
		{400, "INVALID_REQUEST", "invalid_argument", nil, ErrInvalidRequest},
		{501, "UNSUPPORTED", "unimplemented", nil, ErrUnsupported},
		{400, "SESSION_ENDED", "failed_precondition", map[string]string{"ended_reason": "lifetime"}, ErrSessionEnded},
	} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
			return tc.status, refusal(tc.reason, tc.code, tc.md)
		})
		c := newClient(t, url)
		ctx := context.Background()
		_, e1 := c.ListSessions(ctx)
		_, e2 := c.GetSession(ctx, sidA)
		_, e3 := c.ExtendSession(ctx, sidA, 60)
		_, e4 := c.ConnectSession(ctx, sidA, "")
		for i, err := range []error{e1, e2, e3, e4} {
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("%s, call %d: %v", tc.reason, i, err)
			}
		}
		var se *SessionEndedError
		if tc.reason == "SESSION_ENDED" && (!errors.As(e3, &se) || se.Reason != "lifetime") {
			t.Errorf("ExtendSession of an ended session: %v", e3)
		}
	}
}

// ConnectSession: the chain goes on from the session's last record, and an
// ended session is refused as a call to it would be.
func TestConnectSession(t *testing.T) {
	head := strings.Repeat("3c", 32)
	var prev string
	state, why := "ready", ""
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		if strings.HasSuffix(path, "/GetSession") {
			a := sessionInfoAnswer(sidA)
			a["previous_digest"], a["state"], a["ended_reason"] = head, state, why
			return 200, a
		}
		v := bodyValue(t, body)
		delete(v, "session_id")
		hashed := any(v)
		if strings.HasSuffix(path, "/RunInSession") {
			hashed = v["run"]
		}
		r := ran(t, hashed, "", "container", prev)
		prev = r["record"].(map[string]any)["digest"].(string)
		return 200, r
	})
	c := newClient(t, url)
	ctx := context.Background()
	prev = head
	s, err := c.ConnectSession(ctx, sidA, TierContainer)
	if err != nil || s.ID != sidA || s.Chain().Head() != head || s.Chain().Len() != 0 {
		t.Fatalf("%v %+v", err, s)
	}
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "1"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, py("2")); err != nil {
		t.Fatal(err)
	}
	entries := s.Chain().Entries()
	if len(entries) != 2 || entries[0].Record.PreviousDigest != head || record.VerifyChain(entries, head) != nil {
		t.Fatalf("chain of %d", len(entries))
	}
	// The floor given is the Session's: sent with a run that sets none.
	if !strings.Contains(f.bodies[2], `"minimum_isolation":"container"`) {
		t.Fatalf("sent %s", f.bodies[2])
	}
	// A call the reconnected handle did not make breaks the chain.
	prev = strings.Repeat("77", 32)
	_, err = s.Cell(ctx, &Cell{Language: "python", Code: "3"}, 0)
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != record.CheckPreviousDigest || ce.Index != 2 {
		t.Fatalf("want a previous_digest chain error, got %v", err)
	}
	// A handle that starts from "" fails on a session that had calls.
	prev = head
	fresh := &Session{ID: sidA, c: c, chain: record.NewChain("")}
	if _, err := fresh.Cell(ctx, &Cell{Language: "python", Code: "4"}, 0); !errors.As(err, &ce) {
		t.Fatalf("a chain from the open: %v", err)
	}

	// Ended: the session-ended error, with why, and no Session.
	state, why = "ended", "the session reached its lifetime"
	n := f.count()
	s, err = c.ConnectSession(ctx, sidA, "")
	var se *SessionEndedError
	if s != nil || !errors.As(err, &se) || !errors.Is(err, ErrSessionEnded) || se.Reason != why ||
		se.Err.Dispatched || se.Err.Reason != "SESSION_ENDED" || se.Err.Metadata["ended_reason"] != why {
		t.Fatalf("%v %+v", err, s)
	}
	if f.count() != n+1 {
		t.Fatal("ConnectSession made more than its GetSession")
	}
}

// Info and Extend go to the daemon at once, whatever call the Session
// is making.
func TestSessionInfoAndExtendWaitForNoCall(t *testing.T) {
	release := make(chan struct{})
	_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		switch {
		case strings.HasSuffix(path, "/GetSession"), strings.HasSuffix(path, "/ExtendSession"):
			return 200, sessionInfoAnswer(sidA)
		}
		<-release
		return 200, ran(t, bodyValue(t, body)["run"], "", "container", "")
	})
	c := newClient(t, url)
	s := &Session{ID: sidA, c: c, chain: record.NewChain("")}
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), py("slow"))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.Sleep(50 * time.Millisecond) // the run holds the Session
	if _, err := s.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Extend(ctx, 60); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// Sessions behind a proxy (README.md, "Sessions behind a proxy (fleets)"): a
// Session sends its route as the Plimsoll-Route header on every later
// call, the Client's calls by id take OnRoute, a route is checked before
// anything is sent, and WRONG_ROUTE is ErrWrongRoute. Against the fake
// daemons of client_test.go and stream_test.go, then the harness's session
// daemon (PLIMSOLL_INSTANCE=clients-docker).

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// routeFake answers OpenSession with route (none when ""), GetSession with
// a SessionInfo of that route, and every other call with NOT_FOUND: what
// is sent is what these tests look at.
func routeFake(t *testing.T, route string) (*fake, string) {
	return newFake(t, func(n int, path string, body []byte) (int, any) {
		switch {
		case strings.HasSuffix(path, "/OpenSession"):
			if route == "" {
				return 200, map[string]any{"session_id": sidA}
			}
			return 200, map[string]any{"session_id": sidA, "route": route}
		case strings.HasSuffix(path, "/GetSession"), strings.HasSuffix(path, "/ExtendSession"):
			a := sessionInfoAnswer(sidA)
			if route != "" {
				a["route"] = route
			}
			return 200, a
		}
		return 404, refusal("NOT_FOUND", "not_found", map[string]string{"dispatched": "false"})
	})
}

// everySessionCall makes each call of s once (their errors are the fake's
// NOT_FOUND) and returns the methods called, in order.
func everySessionCall(t *testing.T, s *Session) []string {
	ctx := context.Background()
	s.Run(ctx, py("1"))
	s.Cell(ctx, &Cell{Language: "python", Code: "1"}, 0)
	s.WriteFiles(ctx, []File{{Path: "a.txt", Content: "a"}})
	s.ReadFile(ctx, "a.txt", 0, 0)
	s.ListFiles(ctx, "", 0)
	if _, err := s.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Extend(ctx, 60); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	return []string{"RunInSession", "RunCell", "WriteFiles", "ReadFile", "ListFiles", "GetSession",
		"ExtendSession", "CloseSession"}
}

// wantRouted checks that the calls of f from index from are methods, each
// with the header route ("" : none).
func wantRouted(t *testing.T, f *fake, from int, methods []string, route string) {
	t.Helper()
	if len(f.paths)-from != len(methods) {
		t.Fatalf("%d calls sent, want %d: %v", len(f.paths)-from, len(methods), f.paths[from:])
	}
	for i, m := range methods {
		p, h := f.paths[from+i], f.headers[from+i]
		if p != servicePath+m {
			t.Errorf("call %d is %s, want %s", i, p, m)
		}
		got, has := h.Get(RouteHeader), len(h.Values(RouteHeader)) > 0
		if got != route || has != (route != "") || len(h.Values(RouteHeader)) > 1 {
			t.Errorf("%s sent %s %q, want %q", m, RouteHeader, h.Values(RouteHeader), route)
		}
	}
}

func TestSessionSendsItsRoute(t *testing.T) {
	f, url := routeFake(t, "daemon-1.eu_west")
	c := newClient(t, url)
	s, err := c.OpenSession(context.Background(), &OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Route() != "daemon-1.eu_west" {
		t.Fatalf("route %q", s.Route())
	}
	// OpenSession itself goes anywhere: no header.
	wantRouted(t, f, 0, []string{"OpenSession"}, "")
	wantRouted(t, f, 1, everySessionCall(t, s), "daemon-1.eu_west")
}

func TestSessionWithoutRouteSendsNone(t *testing.T) {
	// A daemon older than routes answers none: no header, ever.
	f, url := routeFake(t, "")
	c := newClient(t, url)
	s, err := c.OpenSession(context.Background(), &OpenSessionRequest{})
	if err != nil || s.Route() != "" {
		t.Fatalf("%v %q", err, s.Route())
	}
	wantRouted(t, f, 1, everySessionCall(t, s), "")
	info, err := c.GetSession(context.Background(), sidA)
	if err != nil || info.Route != "" {
		t.Fatalf("%v %+v", err, info)
	}
}

func TestCellStreamSendsTheRoute(t *testing.T) {
	f := newRawFake(t, func(int, rawReq) []any {
		return httpParts([]byte(`{"code":"not_found","message":"no"}`), 404, "application/json", "length", 1)
	})
	c := newClient(t, f.url)
	s := &Session{ID: sidA, c: c, chain: nil, route: "d2"}
	if _, err := s.CellStream(context.Background(), &Cell{Language: "python", Code: "1"}, 0, nil); err == nil {
		t.Fatal("the fake refuses")
	}
	if _, err := c.RunCellStream(context.Background(), &RunCellRequest{SessionID: sidA,
		Cell: &Cell{Language: "python", Code: "1"}}, nil, OnRoute("d3")); err == nil {
		t.Fatal("the fake refuses")
	}
	if _, err := c.RunStream(context.Background(), streamReq, nil); err == nil {
		t.Fatal("the fake refuses")
	}
	if len(f.reqs) != 3 || f.reqs[0].header.Get(RouteHeader) != "d2" || f.reqs[1].header.Get(RouteHeader) != "d3" ||
		len(f.reqs[2].header.Values(RouteHeader)) != 0 || f.reqs[0].path != servicePath+"RunCellStream" {
		t.Fatalf("sent %+v", f.reqs)
	}
}

func TestClientCallsTakeARoute(t *testing.T) {
	f, url := routeFake(t, "d1")
	c := newClient(t, url)
	ctx := context.Background()
	r := OnRoute("other-daemon")
	c.GetSession(ctx, sidA, r)
	c.ExtendSession(ctx, sidA, 60, r)
	c.RunInSession(ctx, &RunInSessionRequest{SessionID: sidA, Run: py("1")}, r)
	c.RunCell(ctx, &RunCellRequest{SessionID: sidA, Cell: &Cell{Language: "python", Code: "1"}}, r)
	c.WriteFiles(ctx, sidA, []File{{Path: "a", Content: "a"}}, r)
	c.ReadFile(ctx, sidA, "a", 0, 0, r)
	c.ListFiles(ctx, sidA, "", 0, r)
	c.CloseSession(ctx, sidA, r)
	wantRouted(t, f, 0, []string{"GetSession", "ExtendSession", "RunInSession", "RunCell", "WriteFiles", "ReadFile",
		"ListFiles", "CloseSession"}, "other-daemon")
	// No option, or OnRoute(""): no header.
	n := f.count()
	c.GetSession(ctx, sidA)
	c.CloseSession(ctx, sidA, OnRoute(""))
	wantRouted(t, f, n, []string{"GetSession", "CloseSession"}, "")
}

func TestConnectSessionTakesARoute(t *testing.T) {
	f, url := routeFake(t, "answered")
	c := newClient(t, url)
	ctx := context.Background()
	// The route given is the Session's, and GetSession's already.
	s, err := c.ConnectSession(ctx, sidA, "", OnRoute("given"))
	if err != nil || s.Route() != "given" {
		t.Fatalf("%v %+v", err, s)
	}
	wantRouted(t, f, 0, []string{"GetSession"}, "given")
	s.Close(ctx)
	wantRouted(t, f, 1, []string{"CloseSession"}, "given")
	// Without one, the Session takes the route GetSession answers.
	s, err = c.ConnectSession(ctx, sidA, "")
	if err != nil || s.Route() != "answered" {
		t.Fatalf("%v %+v", err, s)
	}
	wantRouted(t, f, 2, []string{"GetSession"}, "")
	s.Close(ctx)
	wantRouted(t, f, 3, []string{"CloseSession"}, "answered")
}

func TestInvalidRouteIsRefusedBeforeSending(t *testing.T) {
	f, url := routeFake(t, "d1")
	c := newClient(t, url)
	ctx := context.Background()
	for _, bad := range []string{"has space", "a/b", "x\r\nInjected: 1", strings.Repeat("r", 64), "é", "a:b"} {
		r := OnRoute(bad)
		_, e1 := c.GetSession(ctx, sidA, r)
		_, e2 := c.ConnectSession(ctx, sidA, "", r)
		_, e3 := c.RunCell(ctx, &RunCellRequest{SessionID: sidA, Cell: &Cell{Language: "python", Code: "1"}}, r)
		_, e4 := c.RunCellStream(ctx, &RunCellRequest{SessionID: sidA, Cell: &Cell{Language: "python", Code: "1"}}, nil, r)
		e5 := c.CloseSession(ctx, sidA, r)
		_, e6 := c.WriteFiles(ctx, sidA, []File{{Path: "a", Content: "a"}}, r)
		for i, err := range []error{e1, e2, e3, e4, e5, e6} {
			var e *Error
			if !errors.Is(err, ErrInvalidRequest) || !errors.As(err, &e) || e.HTTPStatus != 0 || e.Dispatched ||
				!strings.Contains(e.Message, "route") {
				t.Errorf("%q, call %d: %v", bad, i, err)
			}
		}
	}
	if f.count() != 0 {
		t.Fatalf("%d calls sent", f.count())
	}
	// The longest route is fine.
	if _, err := c.GetSession(ctx, sidA, OnRoute(strings.Repeat("r", 63))); err != nil {
		t.Fatal(err)
	}
}

func TestAnsweredRouteIsChecked(t *testing.T) {
	for _, bad := range []any{"bad route", strings.Repeat("r", 64), 7} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
			if strings.HasSuffix(path, "/OpenSession") {
				return 200, map[string]any{"session_id": sidA, "route": bad}
			}
			a := sessionInfoAnswer(sidA)
			a["route"] = bad
			return 200, a
		})
		c := newClient(t, url)
		_, err := c.OpenSession(context.Background(), &OpenSessionRequest{})
		wantAnswerProtocol(t, "OpenSession's route", err)
		_, err = c.GetSession(context.Background(), sidA)
		wantAnswerProtocol(t, "GetSession's route", err)
	}
}

func TestWrongRouteIsTypedAndNotRetried(t *testing.T) {
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		return 503, refusal("WRONG_ROUTE", "unavailable", map[string]string{"dispatched": "false"})
	})
	c := newClient(t, url, WithRetry(RetryPolicy{MaxAttempts: 4}))
	s := &Session{ID: sidA, c: c, chain: nil, route: "gone"}
	_, err := s.Cell(context.Background(), &Cell{Language: "python", Code: "1"}, 0)
	var e *Error
	if !errors.Is(err, ErrWrongRoute) || !errors.As(err, &e) || e.Dispatched || e.Code != "unavailable" ||
		e.HTTPStatus != 503 || errors.Is(err, ErrInfrastructure) || f.count() != 1 {
		t.Fatalf("%v, %d calls", err, f.count())
	}
}

// sessionRoute is the harness's session daemon's route; the test skips
// without the session daemon.
func sessionRoute(t *testing.T) string {
	t.Helper()
	sessionClient(t, "PLIMSOLL_TEST_KEY") // skips without the daemon
	return need(t, "PLIMSOLL_TEST_SESSION_ROUTE")
}

func TestSessionRouteLive(t *testing.T) {
	route := sessionRoute(t)
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if s.Route() != route {
		t.Fatalf("route %q, want %q", s.Route(), route)
	}
	// Its later calls carry it, and the daemon takes them.
	if res, err := s.Cell(ctx, &Cell{Language: "python", Code: "x = 41"}, 0); err != nil || res.ExitCode != 0 {
		t.Fatalf("%s %v", show(res), err)
	}
	if _, err := s.WriteFiles(ctx, []File{{Path: "r.txt", Content: "r"}}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Route != route || info.Calls != 2 {
		t.Fatalf("%v %+v", err, info)
	}

	// Elsewhere: the daemon reached is not the session's, and says so
	// before anything runs.
	elsewhere := OnRoute("elsewhere")
	_, err = c.RunCell(ctx, &RunCellRequest{SessionID: s.ID, Cell: &Cell{Language: "python", Code: "x = 0"}}, elsewhere)
	var e *Error
	if !errors.Is(err, ErrWrongRoute) || !errors.As(err, &e) || e.Dispatched || e.Code != "unavailable" ||
		e.HTTPStatus != 503 {
		t.Fatalf("a cell elsewhere: %v", err)
	}
	if _, err := c.ConnectSession(ctx, s.ID, "", elsewhere); !errors.Is(err, ErrWrongRoute) {
		t.Fatalf("ConnectSession elsewhere: %v", err)
	}
	if _, err := c.WriteFiles(ctx, s.ID, []File{{Path: "r.txt", Content: "no"}}, elsewhere); !errors.Is(err, ErrWrongRoute) {
		t.Fatalf("WriteFiles elsewhere: %v", err)
	}
	info, err = c.GetSession(ctx, s.ID, OnRoute(route))
	if err != nil || info.Calls != 2 || info.PreviousDigest != s.Chain().Head() {
		t.Fatalf("something ran elsewhere: %v %+v", err, info)
	}

	// The right route: a handle that works, its chain going on.
	r, err := c.ConnectSession(ctx, s.ID, "", OnRoute(route))
	if err != nil || r.Route() != route {
		t.Fatalf("%v %+v", err, r)
	}
	res, err := r.Cell(ctx, &Cell{Language: "python", Code: "print(x + 1)"}, 0)
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("%s %v", show(res), err)
	}
	got, err := r.ReadAll(ctx, "r.txt")
	if err != nil || string(got) != "r" {
		t.Fatalf("%q %v", got, err)
	}
	if res, err := c.RunCell(ctx, &RunCellRequest{SessionID: s.ID, Cell: &Cell{Language: "python", Code: "print(x)"}},
		OnRoute(route)); err != nil || res.Stdout != "41\n" {
		t.Fatalf("%s %v", show(res), err)
	}

	// A route no daemon may have: refused before sending.
	_, err = c.RunCell(ctx, &RunCellRequest{SessionID: s.ID, Cell: &Cell{Language: "python", Code: "1"}}, OnRoute("no such/route"))
	if !errors.Is(err, ErrInvalidRequest) || !errors.As(err, &e) || e.HTTPStatus != 0 {
		t.Fatalf("%v", err)
	}
	if info, err := r.Info(ctx); err != nil || info.Calls != 5 {
		t.Fatalf("%v %+v", err, info)
	}
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"plimsoll/record"
)

// Session is an open session: calls share a sandbox whose files and kept
// interpreters persist. It checks every answer's record against its chain
// (record.Chain) and advances the chain only when all checks hold; after a
// chain error or a tier mismatch, open a new session. Calls on one Session
// are serialized.
type Session struct {
	// ID is the session's id.
	ID string

	c     *Client
	mu    sync.Mutex
	chain *record.Chain
	floor string
	route string
}

// Route is the route of the daemon that holds the session (its
// PLIMSOLL_INSTANCE): OpenSession's answer, or what ConnectSession was
// given or found. Every later call of the Session sends it as the
// Plimsoll-Route header, so a proxy in front of many daemons (a fleet)
// sends the call to that daemon. "" (a daemon older than routes): no
// header is sent.
func (s *Session) Route() string { return s.route }

// routed is ctx carrying the Session's route to the exchange.
func (s *Session) routed(ctx context.Context) context.Context {
	return withRoute(ctx, s.route)
}

// Chain is the session's chain of accepted records. A harness signs its
// Head (which covers every earlier record) with its own key. A Session of
// ConnectSession holds only the records it accepted itself: its chain
// starts at the session's last record when it connected
// (SessionInfo.PreviousDigest), which its first entry's record names.
func (s *Session) Chain() *record.Chain { return s.chain }

// Run runs a snippet or a project in the session.
func (s *Session) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req != nil && req.MinimumIsolation == "" && s.floor != "" {
		withFloor := *req
		withFloor.MinimumIsolation = s.floor
		req = &withFloor
	}
	body, sent, floor, err := sessionRun(&RunInSessionRequest{SessionID: s.ID, Run: req})
	if err != nil {
		return nil, err
	}
	res, resp, err := s.c.run(s.routed(ctx), "RunInSession", body, floor)
	if err != nil {
		return nil, err
	}
	if _, err := s.chain.Append(sent, resp); err != nil {
		return nil, err
	}
	return res, nil
}

// Cell runs a cell in the session's kept interpreter of its language;
// timeoutMs 0 is the daemon's default (and is not sent).
func (s *Session) Cell(ctx context.Context, cell *Cell, timeoutMs uint32) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, sent, err := sessionCell(&RunCellRequest{SessionID: s.ID, Cell: cell, TimeoutMs: timeoutMs})
	if err != nil {
		return nil, err
	}
	res, resp, err := s.c.run(s.routed(ctx), "RunCell", body, s.floor)
	if err != nil {
		return nil, err
	}
	if _, err := s.chain.Append(sent, resp); err != nil {
		return nil, err
	}
	return res, nil
}

// Close ends the session; later calls get a *SessionEndedError.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.CloseSession(s.routed(ctx), s.ID)
}

// argumentError is a call the client refuses before sending anything: the
// INVALID_REQUEST the daemon would answer, not dispatched, HTTPStatus 0.
func argumentError(method, format string, args ...any) *Error {
	return &Error{Reason: "INVALID_REQUEST", Code: "invalid_argument",
		Message:  method + ": " + fmt.Sprintf(format, args...) + " (the client's check; nothing was sent)",
		Metadata: map[string]string{}}
}

// RouteHeader is the request header that names a session's daemon
// (Session.Route), and the answer header in which every daemon names
// itself.
const RouteHeader = "Plimsoll-Route"

// MaxRouteLength is the longest route: a daemon's PLIMSOLL_INSTANCE is 1 to
// 63 of A-Z, a-z, 0-9, '.', '_' and '-'.
const MaxRouteLength = 63

// validRoute: 1 to MaxRouteLength of [A-Za-z0-9._-].
func validRoute(r string) bool {
	if r == "" || len(r) > MaxRouteLength {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

type routeKey struct{}

// withRoute is ctx carrying route ("" carries none) to exchange and
// streamAttempt, which send it as RouteHeader.
func withRoute(ctx context.Context, route string) context.Context {
	if route == "" {
		return ctx
	}
	return context.WithValue(ctx, routeKey{}, route)
}

// routeOf is the route ctx carries, "" for none.
func routeOf(ctx context.Context) string {
	r, _ := ctx.Value(routeKey{}).(string)
	return r
}

// CallOption adjusts one of the Client's calls about a session by id
// (GetSession, RunCell, WriteFiles, ConnectSession, …).
type CallOption func(*callOptions)

type callOptions struct {
	route string
}

// OnRoute sends the call to the daemon of route (SessionInfo.Route,
// Session.Route) through a proxy in front of a fleet: the call carries it
// as the Plimsoll-Route header. "" is no route (no header). A route that is
// not 1 to 63 of [A-Za-z0-9._-] is refused before anything is sent
// (ErrInvalidRequest). A daemon reached that is not route's refuses with
// ErrWrongRoute: the session is out of reach, and nothing ran.
func OnRoute(route string) CallOption {
	return func(o *callOptions) { o.route = route }
}

func callOptionsOf(opts []CallOption) callOptions {
	var o callOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// routed applies opts to ctx: the route they name, checked.
func routed(ctx context.Context, method string, opts []CallOption) (context.Context, error) {
	o := callOptionsOf(opts)
	if o.route == "" {
		return ctx, nil
	}
	if !validRoute(o.route) {
		return nil, argumentError(method, "route: %q is not 1 to %d of A-Z, a-z, 0-9, '.', '_' and '-'",
			clip(o.route, 80), MaxRouteLength)
	}
	return withRoute(ctx, o.route), nil
}

// clip is s cut to at most n bytes, for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// sessionCall sends a call about one session (session_id, and ends_in_s
// when it is not 0) and returns the SessionInfo it answers, which must be
// that session's.
func (c *Client) sessionCall(ctx context.Context, method, sessionID string, endsInS uint32, opts []CallOption) (*SessionInfo, error) {
	if sessionID == "" {
		return nil, argumentError(method, "session_id: required")
	}
	ctx, err := routed(ctx, method, opts)
	if err != nil {
		return nil, err
	}
	body, _, err := encode(struct {
		SessionID string `json:"session_id"`
		EndsInS   uint32 `json:"ends_in_s,omitempty"`
	}{sessionID, endsInS})
	if err != nil {
		return nil, err
	}
	m, data, err := c.invoke(ctx, method, body)
	if err != nil {
		return nil, err
	}
	info, err := sessionInfoOf(m, method)
	if err == nil && info.SessionID != sessionID {
		err = bad("%s answers about another session than the one asked for", method)
	}
	if err != nil {
		return nil, protocolError(method, http.StatusOK, err)
	}
	info.Raw = json.RawMessage(data)
	return &info, nil
}

// ListSessions lists the caller's own sessions, oldest first: those open
// and those that ended a while ago (State SessionEnded, with EndedReason).
// Another caller's sessions are never listed. A daemon without sessions
// refuses with ErrUnsupported.
func (c *Client) ListSessions(ctx context.Context) ([]SessionInfo, error) {
	m, data, err := c.invoke(ctx, "ListSessions", []byte("{}"))
	if err != nil {
		return nil, err
	}
	// The answer passed its checks (checkAnswer); its sessions are read
	// again as they came, for Raw.
	var raw struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	list, _ := m["sessions"].([]any)
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Sessions) != len(list) {
		return nil, protocolError("ListSessions", http.StatusOK, fmt.Errorf("its sessions cannot be read (%v)", err))
	}
	out := make([]SessionInfo, 0, len(list))
	for i, x := range list {
		info, err := sessionInfoOf(x.(map[string]any), fmt.Sprintf("ListSessions.sessions[%d]", i))
		if err != nil {
			return nil, protocolError("ListSessions", http.StatusOK, err)
		}
		info.Raw = raw.Sessions[i]
		out = append(out, info)
	}
	return out, nil
}

// GetSession is one of the caller's sessions as it is now, ended ones
// included (State SessionEnded); it waits for no call in progress. An id
// that is unknown, long gone or another caller's is ErrNotFound, the same
// refusal for each. OnRoute names the session's daemon behind a proxy.
func (c *Client) GetSession(ctx context.Context, sessionID string, opts ...CallOption) (*SessionInfo, error) {
	return c.sessionCall(ctx, "GetSession", sessionID, 0, opts)
}

// ExtendSession makes the session end endsInS seconds from this call
// (shorter than before is allowed: it then ends sooner) and returns it as
// it is after. It waits for no call in progress. The end may be at most
// SessionInfo.MaxLifetimeS after the session's open: past that the daemon
// refuses with ErrInvalidRequest (its message names
// SANDBOX_SESSION_MAX_LIFETIME and ends "at most K", the most it may ask
// now). An ended session is a *SessionEndedError. endsInS 0 is refused
// before anything is sent (ErrInvalidRequest). OnRoute names the
// session's daemon behind a proxy.
func (c *Client) ExtendSession(ctx context.Context, sessionID string, endsInS uint32, opts ...CallOption) (*SessionInfo, error) {
	if endsInS == 0 {
		return nil, argumentError("ExtendSession", "ends_in_s: required, a whole number of seconds from 1")
	}
	return c.sessionCall(ctx, "ExtendSession", sessionID, endsInS, opts)
}

// ConnectSession returns a Session for a session opened earlier (by this
// process or another, with the same key), for instance after a restart.
// It calls GetSession: an ended session is a *SessionEndedError, and the
// chain starts from the session's last record (SessionInfo.PreviousDigest),
// so the Session's next call must name it: a call made in between by
// anyone (one still running when GetSession answered too: see
// SessionInfo.CallsWaiting) fails that call's chain check.
//
// minimumIsolation is the Session's floor, as
// OpenSessionRequest.MinimumIsolation ("" for none): the client keeps no
// floor of a session, so give the one it was opened with.
//
// It takes the daemon's word for the last record: a harness that kept the
// first handle's chain compares its Head with GetSession's PreviousDigest
// first (equal: no call was made in between).
//
// Behind a proxy in front of many daemons, OnRoute(route) names the
// session's daemon (Session.Route of the handle that opened it, or
// SessionInfo.Route): GetSession and every call of the Session send it,
// and a session whose daemon is out of reach is ErrWrongRoute. Without
// OnRoute, the Session takes the route GetSession's answer gives.
func (c *Client) ConnectSession(ctx context.Context, sessionID, minimumIsolation string, opts ...CallOption) (*Session, error) {
	if minimumIsolation != "" && TierRank(minimumIsolation) < 0 {
		return nil, fmt.Errorf("plimsoll: unknown floor %q", minimumIsolation)
	}
	info, err := c.GetSession(ctx, sessionID, opts...)
	if err != nil {
		return nil, err
	}
	route := info.Route
	if o := callOptionsOf(opts); o.route != "" {
		route = o.route
	}
	if info.Ended() {
		why := info.EndedReason
		if why == "" {
			why = "ended"
		}
		return nil, &SessionEndedError{Reason: why, Err: &Error{
			Reason: "SESSION_ENDED", Code: "failed_precondition", HTTPStatus: http.StatusOK,
			Message:  fmt.Sprintf("GetSession: the session ended (%s); open a new one", why),
			Metadata: map[string]string{"ended_reason": why, "dispatched": "false"},
		}}
	}
	return &Session{ID: info.SessionID, c: c, chain: record.NewChain(info.PreviousDigest), floor: minimumIsolation,
		route: route}, nil
}

// Info is the session as the daemon holds it now (GetSession). It waits
// neither for the daemon's call in progress nor for this Session's.
func (s *Session) Info(ctx context.Context) (*SessionInfo, error) {
	return s.c.GetSession(s.routed(ctx), s.ID)
}

// Extend makes the session end endsInS seconds from now (ExtendSession).
// Like Info, it waits for no call in progress.
func (s *Session) Extend(ctx context.Context, endsInS uint32) (*SessionInfo, error) {
	return s.c.ExtendSession(s.routed(ctx), s.ID, endsInS)
}

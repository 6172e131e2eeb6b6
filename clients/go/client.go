// SPDX-License-Identifier: Apache-2.0
// Package plimsoll is the Go client of plimsolld, a daemon that runs
// untrusted code behind a stated isolation tier (docs/clients.md).
//
// Three channels, three kinds of answer: a run that ran is a *Result
// (whatever its exit code); a refusal is an *Error matching one sentinel
// per reason (errors.Is(err, plimsoll.ErrRateLimited)); infrastructure
// trouble matches ErrInfrastructure. Every 200 answer's record is checked
// (package plimsoll/record); a broken one is a *record.ChainError.
package plimsoll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"plimsoll/record"
)

// DefaultTimeout bounds each HTTP exchange unless WithTimeout says otherwise.
const DefaultTimeout = 120 * time.Second

const servicePath = "/plimsoll.v1.SandboxService/"

// RetryPolicy retries AT_CAPACITY and RATE_LIMITED refusals (nothing
// else), up to MaxAttempts attempts in all, sleeping before retry n
// (0-based) a uniform random time in [d/2, d], d = min(Cap, Base × 2^n).
// Zero fields take the defaults (4, 100 ms, 2 s).
type RetryPolicy struct {
	MaxAttempts int
	Base        time.Duration
	Cap         time.Duration
}

// DefaultRetryPolicy is {MaxAttempts: 4, Base: 100 ms, Cap: 2 s}.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 4, Base: 100 * time.Millisecond, Cap: 2 * time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	if p.Base <= 0 {
		p.Base = DefaultRetryPolicy.Base
	}
	if p.Cap <= 0 {
		p.Cap = DefaultRetryPolicy.Cap
	}
	return p
}

// Delay is the bound d before retry n (0-based): min(Cap, Base × 2^n).
func (p RetryPolicy) Delay(n int) time.Duration {
	p = p.withDefaults()
	d := p.Base
	for i := 0; i < n && d < p.Cap; i++ {
		d *= 2
	}
	if d > p.Cap {
		d = p.Cap
	}
	return d
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout bounds each HTTP exchange, from the request to the decoded
// answer however slowly it comes (default 120 s); 0 means no bound beyond
// the context's.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithMaxAnswerBytes caps one answer's body (default DefaultMaxAnswerBytes,
// 256 MiB); a longer one is an ErrProtocol error. n < 1 keeps the default.
func WithMaxAnswerBytes(n int64) Option {
	return func(c *Client) {
		if n >= 1 {
			c.maxAnswer = n
		}
	}
}

// WithRetry turns retries on (they are off by default). Only AT_CAPACITY
// and RATE_LIMITED are retried; when the context ends during a wait, the
// call returns ctx.Err().
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) { p = p.withDefaults(); c.retry = &p }
}

// WithHTTPClient sends through hc instead of a client of the package's own.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRecordVerification turns the record checks of Run, RunInSession,
// RunCell and the Client's file calls (WriteFiles, ReadFile, ListFiles) on
// or off (on by default). A Session always checks its chain, and the tier
// re-check always runs.
func WithRecordVerification(on bool) Option { return func(c *Client) { c.verify = on } }

// Client talks to one plimsolld. It is safe for concurrent use.
type Client struct {
	url        string
	base       string
	key        *bearer
	hc         *http.Client
	timeout    time.Duration
	retry      *RetryPolicy
	verify     bool
	maxAnswer  int64
	maxMessage int64

	mu  sync.Mutex
	rng *rand.Rand
}

// NewClient returns a client of the daemon at url ("http://host:port",
// "https://…", or "unix:/path/to/socket") with the API key apiKey.
//
// An empty url is PLIMSOLL_URL, else DefaultURL; an empty apiKey is
// PLIMSOLL_KEY, else the first line of the file PLIMSOLL_KEY_FILE, else
// none: NewClient("", "") is the client the environment describes. Both
// are trimmed of surrounding whitespace (a key file's newline). A key file
// that cannot be read or holds no key, a key that cannot be sent (a line
// break inside it, …) and a URL that is not one are errors matching
// ErrConfiguration; none of them, and no format of the Client (%v, %+v,
// %#v), shows the key.
func NewClient(url, apiKey string, opts ...Option) (*Client, error) {
	url = resolveURL(url)
	key, err := resolveKey(apiKey)
	if err != nil {
		return nil, err
	}
	c := &Client{url: url, key: key, timeout: DefaultTimeout, verify: true, maxAnswer: DefaultMaxAnswerBytes,
		maxMessage: DefaultMaxMessageBytes, rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	var unixPath string
	switch {
	case strings.HasPrefix(url, "unix:"):
		unixPath = strings.TrimPrefix(url, "unix:")
		if unixPath == "" {
			return nil, configError("", nil, "%q names no socket", url)
		}
		c.base = "http://plimsolld"
	case strings.HasPrefix(url, "http://"), strings.HasPrefix(url, "https://"):
		c.base = strings.TrimRight(url, "/")
	default:
		return nil, configError("", nil, "URL %q is not http://, https:// or unix:", url)
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if unixPath != "" {
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", unixPath)
			}
		}
		c.hc = &http.Client{Transport: tr}
	}
	return c, nil
}

// MaxAnswerBytes is the cap on one answer's body.
func (c *Client) MaxAnswerBytes() int64 { return c.maxAnswer }

// exchange is one POST under ctx: the answer's status, Content-Type and
// body (at most the cap), or a transport or protocol error.
func (c *Client) exchange(ctx context.Context, method string, body []byte) (int, string, []byte, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+servicePath+method, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, transportError(err, "%s", method)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Connect-Protocol-Version", "1")
	hr.Header.Set("Authorization", "Bearer "+c.key.key)
	if r := routeOf(ctx); r != "" {
		hr.Header.Set(RouteHeader, r)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", nil, deadlineError(ctx, method, "waiting for the answer")
		}
		return 0, "", nil, transportError(err, "%s", method)
	}
	defer resp.Body.Close()
	if resp.ContentLength > c.maxAnswer {
		return 0, "", nil, protocolError(method, resp.StatusCode,
			fmt.Errorf("its length, %d bytes, is past the client's cap (%d)", resp.ContentLength, c.maxAnswer))
	}
	data, e := c.readAnswer(ctx, method, resp)
	if e != nil {
		return 0, "", nil, e
	}
	if int64(len(data)) > c.maxAnswer {
		return 0, "", nil, protocolError(method, resp.StatusCode,
			fmt.Errorf("it is longer than the client's cap (%d bytes)", c.maxAnswer))
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data, nil
}

// attempt is one exchange and its decoding under one deadline: the 200
// answer as a JSON object (its known members of their types) and its
// bytes, or the error.
func (c *Client) attempt(ctx context.Context, method string, body []byte) (map[string]any, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	status, ctype, data, err := c.exchange(ctx, method, body)
	if err != nil {
		return nil, nil, err
	}
	if status != http.StatusOK {
		err := decodeError(ctx, method, status, data)
		if ctx.Err() != nil {
			return nil, nil, deadlineError(ctx, method, "still decoding the error")
		}
		return nil, nil, err
	}
	if !mediaTypeIsJSON(ctype) {
		return nil, nil, protocolError(method, status, fmt.Errorf("its Content-Type is %q, not application/json", ctype))
	}
	v, err := parseAnswer(ctx, data)
	if err == nil {
		err = checkAnswer(v, method)
	}
	if ctx.Err() != nil {
		return nil, nil, deadlineError(ctx, method, "still decoding the answer")
	}
	if err != nil {
		return nil, nil, protocolError(method, status, err)
	}
	return v.(map[string]any), data, nil
}

func retryable(err error) bool {
	e, ok := err.(*Error)
	return ok && (e.Reason == "RATE_LIMITED" || e.Reason == "AT_CAPACITY")
}

// jitter is a uniform random time in [d/2, d].
func (c *Client) jitter(d time.Duration) time.Duration {
	half := d / 2
	c.mu.Lock()
	defer c.mu.Unlock()
	return half + time.Duration(c.rng.Int63n(int64(d-half)+1))
}

// invoke sends body to method, retrying as the policy says, and returns a
// 200 answer (as a JSON object, and its bytes) or the error.
func (c *Client) invoke(ctx context.Context, method string, body []byte) (map[string]any, []byte, error) {
	for attempt := 0; ; attempt++ {
		m, data, err := c.attempt(ctx, method, body)
		if err == nil {
			return m, data, nil
		}
		if c.retry == nil || !retryable(err) || attempt+1 >= c.retry.MaxAttempts {
			return nil, nil, err
		}
		if err := c.wait(ctx, attempt); err != nil {
			return nil, nil, err
		}
	}
}

// wait sleeps before retry n, or returns ctx.Err() when the context ends.
func (c *Client) wait(ctx context.Context, n int) error {
	t := time.NewTimer(c.jitter(c.retry.Delay(n)))
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// encode marshals a request and returns the bytes to send (its canonical
// form) and the JSON value they hold, which is what the record's
// request_sha256 covers.
func encode(req any) ([]byte, map[string]any, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("plimsoll: encoding the request: %w", err)
	}
	v, err := record.Parse(b)
	if err != nil {
		return nil, nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("plimsoll: the request is not a JSON object")
	}
	body, err := record.Canonical(m)
	if err != nil {
		return nil, nil, err
	}
	return body, m, nil
}

// decodeInto fills out from a 200 answer that passed its shape check.
func decodeInto(method string, data []byte, out any) error {
	if err := json.Unmarshal(data, out); err != nil {
		return protocolError(method, http.StatusOK, err)
	}
	return nil
}

// tierCheck re-checks a floor against the answer's tier and its record's.
func tierCheck(floor string, resp map[string]any) error {
	if floor == "" {
		return nil
	}
	want := TierRank(floor)
	got, _ := resp["isolation"].(string)
	recTier := ""
	hasRecord := false
	if rec, ok := resp["record"].(map[string]any); ok {
		hasRecord = true
		recTier, _ = rec["isolation"].(string)
	}
	// A missing record's tier is unknown, and an unknown tier is below
	// every floor (docs/clients.md): the mismatch comes before check 1.
	if TierRank(got) >= want && TierRank(recTier) >= want {
		return nil
	}
	md := map[string]string{"minimum_isolation": floor, "isolation": got, "dispatched": "true"}
	if hasRecord {
		md["record_isolation"] = recTier
	}
	return &Error{
		Reason:     ReasonIsolationEvidenceMismatch,
		Code:       "data_loss",
		Message:    fmt.Sprintf("minimum_isolation %q, but the answer says %q and its record %q; the code may have run", floor, got, recTier),
		Dispatched: true, Metadata: md, HTTPStatus: http.StatusOK,
	}
}

// Describe says what the daemon is.
func (c *Client) Describe(ctx context.Context) (*Description, error) {
	_, data, err := c.invoke(ctx, "Describe", []byte("{}"))
	if err != nil {
		return nil, err
	}
	var d Description
	if err := decodeInto("Describe", data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// run sends a run-shaped call and returns its result, the answer as a JSON
// object, after the tier re-check.
func (c *Client) run(ctx context.Context, method string, body []byte, floor string) (*Result, map[string]any, error) {
	resp, data, err := c.invoke(ctx, method, body)
	if err != nil {
		return nil, nil, err
	}
	return c.result(method, resp, data, floor)
}

// result decodes a run's 200 answer (resp, and its bytes data) and
// re-checks its tier.
func (c *Client) result(method string, resp map[string]any, data []byte, floor string) (*Result, map[string]any, error) {
	res := &Result{}
	if err := decodeInto(method, data, res); err != nil {
		return nil, nil, err
	}
	res.Raw = json.RawMessage(data)
	if err := tierCheck(floor, resp); err != nil {
		return nil, nil, err
	}
	return res, resp, nil
}

// checkAlone checks a record with no chain: previous is "" for Run, not
// checked (nil) for a call in a session made outside a Session.
func (c *Client) checkAlone(sent any, resp map[string]any, previous *string) error {
	if !c.verify {
		return nil
	}
	return record.CheckRecord(sent, resp, resp["record"], previous)
}

// Run runs one payload in a fresh sandbox. A guest's non-zero exit is a
// Result, never an error.
func (c *Client) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	if req == nil {
		req = &RunRequest{}
	}
	body, sent, err := encode(req)
	if err != nil {
		return nil, err
	}
	res, resp, err := c.run(ctx, "Run", body, req.MinimumIsolation)
	if err != nil {
		return nil, err
	}
	empty := ""
	if err := c.checkAlone(sent, resp, &empty); err != nil {
		return nil, err
	}
	return res, nil
}

// OpenSession opens a session (docs/sessions.md) and returns the object
// that keeps its chain and its route (Session.Route).
func (c *Client) OpenSession(ctx context.Context, req *OpenSessionRequest) (*Session, error) {
	if req == nil {
		req = &OpenSessionRequest{}
	}
	if req.MinimumIsolation != "" && TierRank(req.MinimumIsolation) < 0 {
		return nil, fmt.Errorf("plimsoll: unknown floor %q", req.MinimumIsolation)
	}
	body, _, err := encode(req)
	if err != nil {
		return nil, err
	}
	m, _, err := c.invoke(ctx, "OpenSession", body)
	if err != nil {
		return nil, err
	}
	id, _ := m["session_id"].(string)
	if id == "" {
		return nil, protocolError("OpenSession", http.StatusOK, errors.New("the answer names no session"))
	}
	route, _ := m["route"].(string)
	if route != "" && !validRoute(route) {
		return nil, protocolError("OpenSession", http.StatusOK,
			fmt.Errorf("its route %q is not 1 to %d of [A-Za-z0-9._-]", clip(route, 80), MaxRouteLength))
	}
	return &Session{ID: id, c: c, chain: record.NewChain(""), floor: req.MinimumIsolation, route: route}, nil
}

// sessionRun encodes a RunInSession call; sent is its "run".
func sessionRun(req *RunInSessionRequest) ([]byte, any, string, error) {
	body, m, err := encode(req)
	if err != nil {
		return nil, nil, "", err
	}
	floor := ""
	if req.Run != nil {
		floor = req.Run.MinimumIsolation
	}
	return body, m["run"], floor, nil
}

// sessionCell encodes a RunCell call; sent is it without its session_id.
func sessionCell(req *RunCellRequest) ([]byte, any, error) {
	body, m, err := encode(req)
	if err != nil {
		return nil, nil, err
	}
	delete(m, "session_id")
	return body, m, nil
}

// RunInSession runs a snippet or a project in a session. This low-level
// call checks the record alone (previous_digest is not checked: no chain
// is kept); a Session keeps the chain. OnRoute names the session's daemon
// behind a proxy.
func (c *Client) RunInSession(ctx context.Context, req *RunInSessionRequest, opts ...CallOption) (*Result, error) {
	ctx, err := routed(ctx, "RunInSession", opts)
	if err != nil {
		return nil, err
	}
	body, sent, floor, err := sessionRun(req)
	if err != nil {
		return nil, err
	}
	res, resp, err := c.run(ctx, "RunInSession", body, floor)
	if err != nil {
		return nil, err
	}
	if err := c.checkAlone(sent, resp, nil); err != nil {
		return nil, err
	}
	return res, nil
}

// RunCell runs a cell in a session's kept interpreter. Like RunInSession,
// it checks the record alone, and takes OnRoute.
func (c *Client) RunCell(ctx context.Context, req *RunCellRequest, opts ...CallOption) (*Result, error) {
	ctx, err := routed(ctx, "RunCell", opts)
	if err != nil {
		return nil, err
	}
	body, sent, err := sessionCell(req)
	if err != nil {
		return nil, err
	}
	res, resp, err := c.run(ctx, "RunCell", body, "")
	if err != nil {
		return nil, err
	}
	if err := c.checkAlone(sent, resp, nil); err != nil {
		return nil, err
	}
	return res, nil
}

// CloseSession ends a session. OnRoute names its daemon behind a proxy.
func (c *Client) CloseSession(ctx context.Context, sessionID string, opts ...CallOption) error {
	ctx, err := routed(ctx, "CloseSession", opts)
	if err != nil {
		return err
	}
	body, _, err := encode(struct {
		SessionID string `json:"session_id"`
	}{sessionID})
	if err != nil {
		return err
	}
	_, _, err = c.invoke(ctx, "CloseSession", body)
	return err
}

// readAnswer reads a whole answer's body, at most the client's cap and
// one byte more (the caller judges a body past the cap).
func (c *Client) readAnswer(ctx context.Context, method string, resp *http.Response) ([]byte, *Error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
	if err != nil {
		var e *Error
		if ctx.Err() != nil {
			e = deadlineError(ctx, method, "reading the answer")
		} else {
			e = transportError(err, "%s: reading the answer", method)
		}
		e.HTTPStatus = resp.StatusCode
		return nil, e
	}
	return data, nil
}

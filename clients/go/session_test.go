// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"plimsoll/record"
)

// sessionClient is a client of the docker daemon with sessions; the session
// tests skip (saying why) when the harness could not start one.
func sessionClient(t *testing.T, keyVar string) *Client {
	t.Helper()
	u := os.Getenv("PLIMSOLL_TEST_SESSION_URL")
	if u == "" {
		t.Skip("PLIMSOLL_TEST_SESSION_URL is unset: the harness starts the session daemon only when the docker engine runs; skipping the session tests")
	}
	c, err := NewClient(u, need(t, keyVar))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func py(code string) *RunRequest {
	return &RunRequest{Snippet: &Snippet{Language: "python", Code: code}}
}

func TestSession(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close(ctx)
		}
	}()
	if len(s.ID) != 64 {
		t.Fatalf("session id %q", s.ID)
	}

	// A snippet writes a file that later calls read.
	res, err := s.Run(ctx, py("open('data.txt','w').write('kept')"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write: %s %v", show(res), err)
	}
	if res.Record == nil || res.Record.PreviousDigest != "" {
		t.Fatalf("the first call's record: %s", show(res))
	}
	first := res.Record.Digest

	// The kept interpreter keeps what a cell defined.
	res, err = s.Cell(ctx, &Cell{Language: "python", Code: "x = 41"}, 0)
	if err != nil || res.ExitCode != 0 || !res.InterpreterStarted {
		t.Fatalf("x = 41: %s %v", show(res), err)
	}
	if res.Record.PreviousDigest != first {
		t.Fatalf("the second record names %q, not %q", res.Record.PreviousDigest, first)
	}
	res, err = s.Cell(ctx, &Cell{Language: "python", Code: "x + 1"}, 30000)
	if err != nil || res.Stdout != "42\n" || res.InterpreterStarted {
		t.Fatalf("x + 1: %s %v", show(res), err)
	}

	// A project step sees the file.
	res, err = s.Run(ctx, &RunRequest{Project: &Project{Steps: []Step{
		{Name: "read", Argv: []string{"python3", "-c", "print(open('data.txt').read())"}},
	}}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("project: %s %v", show(res), err)
	}
	out := res.Stdout
	for _, st := range res.Steps {
		out += st.Stdout
	}
	if !strings.Contains(out, "kept") {
		t.Fatalf("the project did not read the file: %s", show(res))
	}

	// A cell that raises is a result with exit code 1.
	res, err = s.Cell(ctx, &Cell{Language: "python", Code: "raise ValueError('no')"}, 0)
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("a raising cell: %s %v", show(res), err)
	}

	// The chain: five entries, verified from the start, head = last digest.
	ch := s.Chain()
	if ch.Len() != 5 || ch.Head() != res.Record.Digest {
		t.Fatalf("chain of %d, head %s, last digest %s", ch.Len(), ch.Head(), res.Record.Digest)
	}
	if err := record.VerifyChain(ch.Entries(), ""); err != nil {
		t.Fatal(err)
	}
	head := ch.Head()

	// Another caller does not find the session.
	other := sessionClient(t, "PLIMSOLL_TEST_KEY_B")
	_, err = other.RunInSession(ctx, &RunInSessionRequest{SessionID: s.ID, Run: py("print(1)")})
	wantRefusal(t, err, ErrNotFound)

	// A call the Session did not make breaks its chain at the next answer.
	res, err = c.RunInSession(ctx, &RunInSessionRequest{SessionID: s.ID, Run: py("print('foreign')")})
	if err != nil || res.Record.PreviousDigest != head {
		t.Fatalf("the low-level call: %s %v", show(res), err)
	}
	_, err = s.Cell(ctx, &Cell{Language: "python", Code: "print(x)"}, 0)
	var ce *record.ChainError
	if !errors.Is(err, record.ErrChain) || !errors.As(err, &ce) || ce.Broken != record.CheckPreviousDigest || ce.Index != 5 {
		t.Fatalf("want a previous_digest chain error at 5, got %v", err)
	}
	if ch.Head() != head || ch.Len() != 5 {
		t.Fatal("a broken answer moved the chain")
	}

	// Closed, the session refuses with why it ended.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	_, err = s.Run(ctx, py("print(1)"))
	var se *SessionEndedError
	if !errors.As(err, &se) || !errors.Is(err, ErrSessionEnded) || se.Reason == "" || se.Err.Dispatched {
		t.Fatalf("want a *SessionEndedError with a reason, got %v", err)
	}
}

func TestSessionTierRecheckAndModule(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	// A floor the daemon meets: the answer is re-checked and accepted.
	req := py("print('floor')")
	req.MinimumIsolation = TierContainer
	res, err := s.Run(ctx, req)
	if err != nil || res.Stdout != "floor\n" || TierRank(res.Isolation) < TierRank(TierContainer) {
		t.Fatalf("%s %v", show(res), err)
	}
	// A session refuses a module, and the refusal leaves the chain alone.
	_, err = s.Run(ctx, &RunRequest{Module: WasmModule([]byte("\x00asm\x01\x00\x00\x00"))})
	wantRefusal(t, err, ErrUnsupported)
	if s.Chain().Len() != 1 {
		t.Fatalf("chain of %d", s.Chain().Len())
	}
	res, err = s.Cell(ctx, &Cell{Language: "python", Code: "print('after')"}, 0)
	if err != nil || res.Stdout != "after\n" || s.Chain().Len() != 2 {
		t.Fatalf("%s %v", show(res), err)
	}
}

// A Session's floor: sent with every run that sets none (the daemon
// refuses below it before anything runs) and re-checked on every answer,
// cells included.
func TestSessionFloor(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, &OpenSessionRequest{MinimumIsolation: TierKernel})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	_, err = s.Run(ctx, py("print(1)"))
	wantRefusal(t, err, ErrInsufficientIsolation)
	_, err = s.Cell(ctx, &Cell{Language: "python", Code: "1"}, 0)
	if !errors.Is(err, ErrIsolationEvidenceMismatch) {
		t.Fatalf("a cell below the session's floor: %v", err)
	}
	if _, err := c.OpenSession(ctx, &OpenSessionRequest{MinimumIsolation: "sideways"}); err == nil {
		t.Fatal("an unknown floor must be refused at open")
	}
}

func TestSessionCellStream(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	d, err := c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "n = 3"}, 0); err != nil {
		t.Fatal(err)
	}
	var out []byte
	chunks := 0
	res, err := s.CellStream(ctx, &Cell{Language: "python", Code: "for i in range(n): print('line', i, flush=True)"}, 0,
		func(ch OutputChunk) error {
			chunks++
			out = append(out, ch.Stdout...)
			return nil
		})
	if err != nil || res.ExitCode != 0 || res.Stdout != "line 0\nline 1\nline 2\n" {
		t.Fatalf("%v %s", err, show(res))
	}
	if len(s.Chain().Entries()) != 2 || s.Chain().Head() != res.Record.Digest {
		t.Fatalf("the chain did not advance: %d entries", len(s.Chain().Entries()))
	}
	if d.Operations.Session.Streams != (chunks > 0) || (chunks > 0 && string(out) != res.Stdout) {
		t.Fatalf("streams %v: %d chunks, %q", d.Operations.Session.Streams, chunks, out)
	}
}

// ListSessions gives the caller's own sessions, oldest first, and never
// another caller's; a closed one stays listed a while, ended.
func TestListSessionsOwnOnly(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	other := sessionClient(t, "PLIMSOLL_TEST_KEY_B")
	ctx := ctxT(t)
	s1, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	s2, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	sb, err := other.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)

	open := func(cl *Client) []string {
		t.Helper()
		list, err := cl.ListSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range list {
			if !x.Ended() {
				ids = append(ids, x.SessionID)
			}
		}
		return ids
	}
	// index is where id is in ids, -1 when it is not.
	index := func(ids []string, id string) int {
		for i, x := range ids {
			if x == id {
				return i
			}
		}
		return -1
	}
	if ids := open(c); index(ids, s1.ID) < 0 || index(ids, s2.ID) <= index(ids, s1.ID) || index(ids, sb.ID) >= 0 {
		t.Fatalf("the caller's open sessions %q, want %s then %s, oldest first, and not %s", ids, s1.ID, s2.ID, sb.ID)
	}
	if ids := open(other); index(ids, sb.ID) < 0 {
		t.Fatalf("the other caller's open sessions %q, want %s among them", ids, sb.ID)
	}
	list, err := other.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.SessionID == s1.ID || x.SessionID == s2.ID {
			t.Fatalf("another caller's list holds %s", x.SessionID)
		}
	}

	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	list, err = c.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range list {
		if x.SessionID == s2.ID {
			found = true
			if !x.Ended() || x.EndedReason == "" || x.EndedAt.IsZero() || !x.LifetimeDeadline.IsZero() {
				t.Fatalf("a closed session: %s", x.Raw)
			}
		}
		if x.SessionID == s1.ID && (x.State != SessionReady && x.State != SessionPaused ||
			len(x.Languages) != 1 || x.Languages[0] != "python") {
			t.Fatalf("an open session: %s", x.Raw)
		}
	}
	if !found {
		t.Fatal("a closed session is no longer listed")
	}
}

// GetSession after calls, ExtendSession within and past the maximum, and
// another caller's id.
func TestGetAndExtendSession(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.SessionID != s.ID || info.State != SessionReady || info.Calls != 0 || info.PreviousDigest != "" ||
		!info.LastCallAt.IsZero() || info.CreatedAt.IsZero() || info.MaxLifetimeS < 600 {
		t.Fatalf("a new session: %s", info.Raw)
	}
	// The harness's SANDBOX_SESSION_LIFETIME is 600 s.
	if d := info.LifetimeDeadline.Sub(info.CreatedAt); d < 599*time.Second || d > 601*time.Second {
		t.Fatalf("lifetime %v: %s", d, info.Raw)
	}

	if _, err := s.Run(ctx, py("open('f','w').write('x')")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "y = 2"}, 0); err != nil {
		t.Fatal(err)
	}
	info, err = c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Calls != 2 || info.CallsWaiting != 0 || info.PreviousDigest != s.Chain().Head() ||
		info.LastCallAt.Before(info.CreatedAt) {
		t.Fatalf("after two calls (head %s): %s", s.Chain().Head(), info.Raw)
	}

	// Extend: the session now ends 1200 s from the call.
	before := time.Now()
	ext, err := s.Extend(ctx, 1200)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if ext.LifetimeDeadline.Before(before.Add(1199*time.Second)) || ext.LifetimeDeadline.After(after.Add(1201*time.Second)) ||
		!ext.LifetimeDeadline.After(info.LifetimeDeadline) {
		t.Fatalf("extended to %v (asked at %v): %s", ext.LifetimeDeadline, before, ext.Raw)
	}
	if got, err := c.GetSession(ctx, s.ID); err != nil || !got.LifetimeDeadline.Equal(ext.LifetimeDeadline) {
		t.Fatalf("GetSession after ExtendSession: %v %+v", err, got)
	}

	// Past the operator's maximum from the open: refused, nothing changes.
	_, err = s.Extend(ctx, ext.MaxLifetimeS+60)
	e := wantRefusal(t, err, ErrInvalidRequest)
	if e.Dispatched || !strings.Contains(e.Message, "SANDBOX_SESSION_MAX_LIFETIME") || !strings.Contains(e.Message, "at most ") {
		t.Fatalf("refusal %+v", e)
	}
	if got, err := s.Info(ctx); err != nil || !got.LifetimeDeadline.Equal(ext.LifetimeDeadline) {
		t.Fatalf("a refused ExtendSession moved the deadline: %v %+v", err, got)
	}

	// Another caller's id is an unknown one, byte for byte.
	other := sessionClient(t, "PLIMSOLL_TEST_KEY_B")
	unknown := strings.Repeat("0", 64)
	_, err = other.GetSession(ctx, s.ID)
	theirs := wantRefusal(t, err, ErrNotFound)
	_, err = other.GetSession(ctx, unknown)
	none := wantRefusal(t, err, ErrNotFound)
	if theirs.Message != none.Message || theirs.Code != none.Code || theirs.HTTPStatus != none.HTTPStatus {
		t.Fatalf("another's %+v, an unknown one %+v", theirs, none)
	}
	_, err = other.ExtendSession(ctx, s.ID, 60)
	wantRefusal(t, err, ErrNotFound)
	_, err = other.ConnectSession(ctx, s.ID, "")
	wantRefusal(t, err, ErrNotFound)
	if got, err := s.Info(ctx); err != nil || !got.LifetimeDeadline.Equal(ext.LifetimeDeadline) {
		t.Fatalf("another caller's ExtendSession moved the deadline: %v %+v", err, got)
	}
}

// ConnectSession continues the chain from the session's last record; a
// shorter ExtendSession ends the session, and then ConnectSession and
// ExtendSession say why.
func TestConnectSessionLive(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "x = 41"}, 0); err != nil {
		t.Fatal(err)
	}
	head := s.Chain().Head()

	// A second handle, as a restarted process would make.
	c2 := sessionClient(t, "PLIMSOLL_TEST_KEY")
	r, err := c2.ConnectSession(ctx, s.ID, TierContainer)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != s.ID || r.Chain().Head() != head || r.Chain().Len() != 0 {
		t.Fatalf("reconnected: id %s head %s len %d, want head %s", r.ID, r.Chain().Head(), r.Chain().Len(), head)
	}
	res, err := r.Cell(ctx, &Cell{Language: "python", Code: "x + 1"}, 0)
	if err != nil || res.Stdout != "42\n" || res.Record.PreviousDigest != head || r.Chain().Len() != 1 {
		t.Fatalf("a cell through the reconnected handle: %s %v", show(res), err)
	}
	if _, err := r.Run(ctx, py("print(1)")); err != nil || r.Chain().Len() != 2 {
		t.Fatalf("a run through the reconnected handle: %v", err)
	}
	if err := record.VerifyChain(r.Chain().Entries(), head); err != nil {
		t.Fatal(err)
	}
	info, err := r.Info(ctx)
	if err != nil || info.Calls != 3 || info.PreviousDigest != r.Chain().Head() {
		t.Fatalf("%v %+v", err, info)
	}
	// To the first handle, the second's calls are foreign.
	_, err = s.Cell(ctx, &Cell{Language: "python", Code: "x"}, 0)
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != record.CheckPreviousDigest {
		t.Fatalf("want a previous_digest chain error on the first handle, got %v", err)
	}

	// Shorter is allowed: the session ends a second from now.
	if _, err := r.Extend(ctx, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err = r.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Ended() || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !info.Ended() || info.EndedReason == "" || info.EndedAt.IsZero() {
		t.Fatalf("not ended after ExtendSession(1): %s", info.Raw)
	}
	_, err = c2.ConnectSession(ctx, s.ID, "")
	var se *SessionEndedError
	if !errors.As(err, &se) || !errors.Is(err, ErrSessionEnded) || se.Reason != info.EndedReason {
		t.Fatalf("ConnectSession of an ended session: %v", err)
	}
	_, err = r.Extend(ctx, 60)
	if !errors.As(err, &se) || se.Reason != info.EndedReason {
		t.Fatalf("ExtendSession of an ended session: %v", err)
	}
}

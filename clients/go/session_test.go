// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"errors"
	"os"
	"strings"
	"testing"

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

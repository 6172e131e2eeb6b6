// SPDX-License-Identifier: Apache-2.0
package plimsoll

// RunStream and RunCellStream against a fake daemon that writes the bytes
// each case says (Connect server streaming, application/connect+json):
// what is sent, the chunks given, and every way a stream can be wrong.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"plimsoll/record"
)

var streamReq = &RunRequest{Snippet: &Snippet{Language: "javascript", Code: "console.log(1)"}}

func streamSent(t *testing.T) map[string]any {
	_, m, err := encode(streamReq)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func envl(flags byte, payload any) []byte {
	b, ok := payload.([]byte)
	if !ok {
		b, _ = json.Marshal(payload)
	}
	return envelope(flags, b)
}

func outEnv(stdout, stderr string, step uint32) []byte {
	o := map[string]any{}
	if stdout != "" {
		o["stdout"] = base64.StdEncoding.EncodeToString([]byte(stdout))
	}
	if stderr != "" {
		o["stderr"] = base64.StdEncoding.EncodeToString([]byte(stderr))
	}
	if step != 0 {
		o["step"] = step
	}
	return envl(0, map[string]any{"output": o})
}

func resultEnv(ans map[string]any) []byte { return envl(0, map[string]any{"result": ans}) }

func endEnv(errObj map[string]any) []byte {
	if errObj == nil {
		return envl(flagEndStream, map[string]any{})
	}
	return envl(flagEndStream, map[string]any{"error": errObj})
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// answerWith is a RunResponse with stdout and stderr (and steps) and a
// record right for hashed.
func answerWith(t *testing.T, hashed any, stdout, stderr string, steps []any, isolation string) map[string]any {
	resp := ran(t, hashed, stdout, isolation, "")
	resp["stderr"] = stderr
	if steps != nil {
		resp["steps"] = steps
	}
	reseal(resp)
	return resp
}

// httpParts is an answer's bytes: the head, then the body in pieces
// (chunked, with a Content-Length, or to the close).
func httpParts(body []byte, status int, ctype, framing string, pieces int) []any {
	head := fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Type: %s\r\nConnection: close\r\n", status, ctype)
	switch framing {
	case "chunked":
		head += "Transfer-Encoding: chunked\r\n"
	case "length":
		head += fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	parts := []any{[]byte(head + "\r\n")}
	step := len(body)/pieces + 1
	for i := 0; i < len(body); i += step {
		j := i + step
		if j > len(body) {
			j = len(body)
		}
		p := body[i:j]
		if framing == "chunked" {
			p = []byte(fmt.Sprintf("%x\r\n%s\r\n", len(p), p))
		}
		parts = append(parts, p)
	}
	if framing == "chunked" {
		parts = append(parts, []byte("0\r\n\r\n"))
	}
	return parts
}

func stream200(body []byte) []any { return httpParts(body, 200, streamMediaType, "chunked", 3) }

type rawReq struct {
	path   string
	header http.Header
	body   []byte
}

// rawFake answers each request with the parts respond gives: []byte is
// written, a time.Duration is a pause, nil hangs up.
type rawFake struct {
	url  string
	mu   sync.Mutex
	reqs []rawReq
}

func (f *rawFake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func newRawFake(t *testing.T, respond func(n int, r rawReq) []any) *rawFake {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	f := &rawFake{url: "http://" + ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				hr, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				body, _ := io.ReadAll(hr.Body)
				f.mu.Lock()
				n := len(f.reqs)
				r := rawReq{hr.URL.Path, hr.Header, body}
				f.reqs = append(f.reqs, r)
				f.mu.Unlock()
				for _, p := range respond(n, r) {
					switch v := p.(type) {
					case nil:
						return
					case time.Duration:
						select {
						case <-done:
							return
						case <-time.After(v):
						}
					case []byte:
						if _, err := conn.Write(v); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return f
}

type streamOutcome struct {
	chunks []OutputChunk
	res    *Result
	err    error
}

func runStream(t *testing.T, parts func(n int, r rawReq) []any, opts ...Option) (streamOutcome, *rawFake) {
	f := newRawFake(t, parts)
	c := newClient(t, f.url, append([]Option{WithTimeout(10 * time.Second)}, opts...)...)
	var o streamOutcome
	o.res, o.err = c.RunStream(context.Background(), streamReq, func(ch OutputChunk) error {
		o.chunks = append(o.chunks, ch)
		return nil
	})
	return o, f
}

func body(b []byte) func(int, rawReq) []any {
	return func(int, rawReq) []any { return stream200(b) }
}

func wantProtocol(t *testing.T, o streamOutcome, match string) {
	t.Helper()
	if !errors.Is(o.err, ErrProtocol) || !errors.Is(o.err, ErrInfrastructure) {
		t.Fatalf("want a protocol error, got %v (result %v)", o.err, o.res)
	}
	if !strings.Contains(o.err.Error(), match) {
		t.Fatalf("%v does not say %q", o.err, match)
	}
}

func TestStreamChunksThenTheCheckedResult(t *testing.T) {
	ans := answerWith(t, streamSent(t), "a\nb\n", "e\n", nil, "process")
	b := cat(outEnv("a\n", "", 0), outEnv("", "e\n", 0), outEnv("b\n", "", 0), resultEnv(ans), endEnv(nil))
	for _, framing := range []string{"chunked", "length", "close"} {
		o, f := runStream(t, func(int, rawReq) []any { return httpParts(b, 200, streamMediaType, framing, len(b)) })
		if o.err != nil {
			t.Fatalf("%s: %v", framing, o.err)
		}
		got := []string{}
		for _, c := range o.chunks {
			got = append(got, fmt.Sprintf("%q/%q/%d", c.Stdout, c.Stderr, c.Step))
		}
		if strings.Join(got, " ") != `"a\n"/""/0 ""/"e\n"/0 "b\n"/""/0` {
			t.Fatalf("%s: chunks %v", framing, got)
		}
		if o.res.Stdout != "a\nb\n" || o.res.Stderr != "e\n" || o.res.Record == nil || len(o.res.Raw) == 0 {
			t.Fatalf("result %+v", o.res)
		}
		r := f.reqs[0]
		want := `{"snippet":{"code":"console.log(1)","language":"javascript"}}`
		if r.path != "/plimsoll.v1.SandboxService/RunStream" || r.header.Get("Content-Type") != streamMediaType ||
			r.header.Get("Authorization") != "Bearer k" || r.header.Get("Connect-Protocol-Version") != "1" ||
			string(r.body) != string(envelope(0, []byte(want))) {
			t.Fatalf("sent %s %v %q", r.path, r.header, r.body)
		}
	}
}

func TestStreamWithoutChunks(t *testing.T) {
	o, _ := runStream(t, body(cat(resultEnv(answerWith(t, streamSent(t), "all\n", "", nil, "process")), endEnv(nil))))
	if o.err != nil || len(o.chunks) != 0 || o.res.Stdout != "all\n" {
		t.Fatalf("%+v", o)
	}
}

func TestStreamProjectSteps(t *testing.T) {
	req := &RunRequest{Project: &Project{Steps: []Step{{Argv: []string{"a"}}, {Argv: []string{"b"}}}}}
	_, sent, _ := encode(req)
	steps := []any{map[string]any{"name": "step-1", "stdout": "one\n"}, map[string]any{"name": "step-2", "stderr": "two\n"}}
	ans := answerWith(t, sent, "", "", steps, "process")
	try := func(b []byte) (streamOutcome, error) {
		f := newRawFake(t, body(b))
		var o streamOutcome
		o.res, o.err = newClient(t, f.url).RunStream(context.Background(), req, func(c OutputChunk) error {
			o.chunks = append(o.chunks, c)
			return nil
		})
		return o, o.err
	}
	if o, err := try(cat(outEnv("one\n", "", 1), outEnv("", "two\n", 2), resultEnv(ans), endEnv(nil))); err != nil || len(o.chunks) != 2 || o.chunks[1].Step != 2 {
		t.Fatalf("%+v", o)
	}
	o, _ := try(cat(outEnv("one\n", "", 1), outEnv("x", "", 3), resultEnv(ans), endEnv(nil)))
	wantProtocol(t, o, "step 3")
	o, _ = try(cat(outEnv("one\n", "", 1), resultEnv(ans), endEnv(nil)))
	wantProtocol(t, o, "step 2's stderr")
}

func TestStreamExactBytes(t *testing.T) {
	ans := answerWith(t, streamSent(t), "\ufffd", "", nil, "process")
	ans["stdout_base64"] = "/w=="
	reseal(ans)
	o, _ := runStream(t, body(cat(envl(0, map[string]any{"output": map[string]any{"stdout": "_w"}}), resultEnv(ans), endEnv(nil))))
	if o.err != nil || string(o.chunks[0].Stdout) != "\xff" || string(o.res.StdoutBytes()) != "\xff" {
		t.Fatalf("%+v", o)
	}
}

func TestStreamRefusals(t *testing.T) {
	md := map[string]string{"dispatched": "false", "isolation": "process"}
	o, _ := runStream(t, body(endEnv(refusal("INSUFFICIENT_ISOLATION", "failed_precondition", md))))
	var e *Error
	if !errors.Is(o.err, ErrInsufficientIsolation) || !errors.As(o.err, &e) || e.Dispatched || e.HTTPStatus != 200 ||
		e.Metadata["isolation"] != "process" || len(o.chunks) != 0 {
		t.Fatalf("%+v", o)
	}
	// every reason of the shared file, as an end-of-stream error
	for reason, want := range loadReasons(t) {
		d := "false"
		if want.Dispatched {
			d = "true"
		}
		o, _ := runStream(t, body(endEnv(refusal(reason, want.Code, map[string]string{"dispatched": d}))))
		var got *Error
		if reason == "SESSION_ENDED" {
			var se *SessionEndedError
			if !errors.As(o.err, &se) {
				t.Fatalf("%s: %v", reason, o.err)
			}
			got = se.Err
		} else if !errors.As(o.err, &got) {
			t.Fatalf("%s: %v", reason, o.err)
		}
		if got.Reason != reason || got.Code != want.Code || got.Dispatched != want.Dispatched || got.HTTPStatus != 200 {
			t.Errorf("%s: %+v, want %+v", reason, got, want)
		}
		if s, ok := sentinels[reason]; !ok || !errors.Is(o.err, s) {
			t.Errorf("%s: %v matches no sentinel of its own", reason, o.err)
		}
	}
}

func TestStreamErrorAfterChunks(t *testing.T) {
	internal := refusal("INTERNAL", "internal", map[string]string{"dispatched": "true"})
	o, _ := runStream(t, body(cat(outEnv("partial\n", "", 0), endEnv(internal))))
	var e *Error
	if !errors.Is(o.err, ErrInfrastructure) || errors.Is(o.err, ErrProtocol) || !errors.As(o.err, &e) ||
		e.Reason != "INTERNAL" || !e.Dispatched || len(o.chunks) != 1 {
		t.Fatalf("%+v", o)
	}
	o, _ = runStream(t, body(cat(resultEnv(answerWith(t, streamSent(t), "", "", nil, "process")), endEnv(internal))))
	if !errors.Is(o.err, ErrInfrastructure) || o.res != nil {
		t.Fatalf("an error after the result: %+v", o)
	}
}

func TestStreamNon200(t *testing.T) {
	for _, status := range []int{404, 415, 502} {
		o, _ := runStream(t, func(int, rawReq) []any {
			return httpParts([]byte("no such method\n"), status, "text/plain", "length", 1)
		})
		var e *Error
		if !errors.Is(o.err, ErrProtocol) || !errors.As(o.err, &e) || e.HTTPStatus != status {
			t.Fatalf("%d: %v", status, o.err)
		}
	}
	b, _ := json.Marshal(refusal("UNAUTHENTICATED", "unauthenticated", map[string]string{"dispatched": "false"}))
	o, _ := runStream(t, func(int, rawReq) []any { return httpParts(b, 401, "application/json", "length", 1) })
	var e *Error
	if !errors.Is(o.err, ErrUnauthenticated) || !errors.As(o.err, &e) || e.HTTPStatus != 401 {
		t.Fatalf("%v", o.err)
	}
	a, _ := json.Marshal(answerWith(t, streamSent(t), "", "", nil, "process"))
	o, _ = runStream(t, func(int, rawReq) []any { return httpParts(a, 200, "application/json", "length", 1) })
	wantProtocol(t, o, "Content-Type")
}

func TestStreamRetriesOnlyBeforeAChunk(t *testing.T) {
	ans := answerWith(t, streamSent(t), "ok\n", "", nil, "process")
	capacity := endEnv(refusal("AT_CAPACITY", "resource_exhausted", map[string]string{"dispatched": "false"}))
	policy := WithRetry(RetryPolicy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond})
	o, f := runStream(t, func(n int, _ rawReq) []any {
		if n == 0 {
			return stream200(capacity)
		}
		return stream200(cat(outEnv("ok\n", "", 0), resultEnv(ans), endEnv(nil)))
	}, policy)
	if o.err != nil || f.count() != 2 || len(o.chunks) != 1 {
		t.Fatalf("%+v, %d calls", o, f.count())
	}
	o, f = runStream(t, body(cat(outEnv("x", "", 0), capacity)), policy)
	if !errors.Is(o.err, ErrAtCapacity) || f.count() != 1 {
		t.Fatalf("after a chunk: %v, %d calls", o.err, f.count())
	}
}

func TestStreamBroken(t *testing.T) {
	ans := resultEnv(answerWith(t, streamSent(t), "a", "", nil, "process"))
	cases := []struct {
		name, match string
		body        []byte
	}{
		{"truncated envelope", "ends inside an envelope", cat(outEnv("a", "", 0), ans[:40])},
		{"truncated header", "ends inside an envelope", cat(outEnv("a", "", 0), ans, endEnv(nil)[:3])},
		{"no result", "without a result", cat(outEnv("a", "", 0), endEnv(nil))},
		{"no end", "without its end-of-stream", cat(outEnv("a", "", 0), ans)},
		{"empty", "without its end-of-stream", nil},
		{"not envelopes", "", []byte("not an envelope at all")},
		{"after the result", "after its result", cat(ans, outEnv("a", "", 0), endEnv(nil))},
		{"after the end", "after its end-of-stream", cat(outEnv("a", "", 0), ans, endEnv(nil), outEnv("x", "", 0))},
		{"a byte after the end", "after its end-of-stream", cat(outEnv("a", "", 0), ans, endEnv(nil), []byte{0})},
		{"both", "both", cat(envl(0, map[string]any{"output": map[string]any{}, "result": map[string]any{}}), endEnv(nil))},
		{"not the result's", "not the result's", cat(outEnv("b", "", 0), ans, endEnv(nil))},
		{"more than the result's", "not the result's", cat(outEnv("a", "", 0), outEnv("b", "", 0), ans, endEnv(nil))},
		{"stderr not the result's", "not the result's", cat(outEnv("a", "e", 0), ans, endEnv(nil))},
		{"end not an object", "end-of-stream", cat(ans, envl(flagEndStream, []byte("[]")))},
		{"error without a code", "not a Connect error", endEnv(map[string]any{"message": "no code"})},
	}
	for _, bad := range []string{`[1]`, `{"output":{"stdout":5}}`, `{"output":{"step":-1}}`, `{"output":{"stdout":"!!"}}`,
		`{"result":{"exit_code":1.5}}`, "\xff", `{"a":1,"a":2}`} {
		cases = append(cases, struct {
			name, match string
			body        []byte
		}{"message " + bad, "", cat(envl(0, []byte(bad)), ans, endEnv(nil))})
	}
	for _, flags := range []byte{0x01, 0x04, 0x80, 0xff} {
		cases = append(cases, struct {
			name, match string
			body        []byte
		}{fmt.Sprintf("flags %#x", flags), "flags",
			cat(envl(flags, map[string]any{"output": map[string]any{}}), ans, endEnv(nil))})
	}
	for _, c := range cases {
		o, _ := runStream(t, body(c.body))
		if !errors.Is(o.err, ErrProtocol) || !strings.Contains(o.err.Error(), c.match) {
			t.Errorf("%s: %v", c.name, o.err)
		}
	}
}

func TestStreamUnknownMembersAndMessages(t *testing.T) {
	b := cat(envl(0, map[string]any{"progress": 1}), envl(0, map[string]any{"output": map[string]any{"stdout": "YQ==", "later": true}}),
		resultEnv(answerWith(t, streamSent(t), "a", "", nil, "process")), envl(flagEndStream, map[string]any{"metadata": map[string]any{"k": []string{"v"}}}))
	o, _ := runStream(t, body(b))
	if o.err != nil || len(o.chunks) != 1 {
		t.Fatalf("%+v", o)
	}
}

func TestStreamCutInsideAnHTTPChunk(t *testing.T) {
	o, _ := runStream(t, func(int, rawReq) []any {
		return append(stream200(outEnv("a", "", 0))[:2], []byte("40\r\nabc"), nil)
	})
	var e *Error
	if !errors.Is(o.err, ErrInfrastructure) || !errors.As(o.err, &e) || !e.Dispatched {
		t.Fatalf("%v", o.err)
	}
}

func TestStreamOversizeEnvelopeRefusedFromItsHeader(t *testing.T) {
	head := make([]byte, 5)
	binary.BigEndian.PutUint32(head[1:], DefaultMaxMessageBytes+1)
	t0 := time.Now()
	o, _ := runStream(t, func(int, rawReq) []any {
		return append(httpParts(head, 200, streamMediaType, "chunked", 1)[:2], 30*time.Second)
	})
	wantProtocol(t, o, "past the client's cap")
	if time.Since(t0) > 8*time.Second {
		t.Fatalf("waited %v for bytes it should not read", time.Since(t0))
	}
	a := strings.Repeat("a", 100)
	o, _ = runStream(t, body(cat(outEnv(a, "", 0), resultEnv(answerWith(t, streamSent(t), a, "", nil, "process")), endEnv(nil))),
		WithMaxMessageBytes(64))
	wantProtocol(t, o, "past the client's cap (64)")
	o, _ = runStream(t, body(cat(outEnv(strings.Repeat("a", 4000), "", 0), outEnv(strings.Repeat("b", 4000), "", 0))),
		WithMaxAnswerBytes(5000))
	wantProtocol(t, o, "longer than the client's cap")
}

func TestStreamRecordAndTierChecked(t *testing.T) {
	ans := answerWith(t, streamSent(t), "a", "", nil, "process")
	ans["stdout"] = "b"
	o, _ := runStream(t, body(cat(outEnv("b", "", 0), resultEnv(ans), endEnv(nil))))
	if !errors.Is(o.err, record.ErrChain) {
		t.Fatalf("a record that does not check: %v", o.err)
	}
	floor := &RunRequest{MinimumIsolation: "process", Snippet: streamReq.Snippet}
	_, sent, _ := encode(floor)
	low := answerWith(t, sent, "", "", nil, "none")
	f := newRawFake(t, body(cat(resultEnv(low), endEnv(nil))))
	if _, err := newClient(t, f.url).RunStream(context.Background(), floor, nil); !errors.Is(err, ErrIsolationEvidenceMismatch) {
		t.Fatalf("below the floor: %v", err)
	}
}

func TestStreamTimeoutBoundsTheWholeStream(t *testing.T) {
	b := []byte(strings.Repeat(string(outEnv("x", "", 0)), 50))
	t0 := time.Now()
	o, _ := runStream(t, func(int, rawReq) []any {
		parts := httpParts(b, 200, streamMediaType, "chunked", 50)
		out := []any{parts[0]}
		for _, p := range parts[1:] {
			out = append(out, p, 200*time.Millisecond)
		}
		return out
	}, WithTimeout(time.Second))
	var e *Error
	if !errors.As(o.err, &e) || e.Code != "deadline_exceeded" || !errors.Is(o.err, context.DeadlineExceeded) || len(o.chunks) == 0 {
		t.Fatalf("%v after %d chunks", o.err, len(o.chunks))
	}
	if time.Since(t0) > 6*time.Second {
		t.Fatalf("took %v", time.Since(t0))
	}
}

func TestStreamCallbackErrorIsReturnedAsItIs(t *testing.T) {
	ans := answerWith(t, streamSent(t), "ab", "", nil, "process")
	f := newRawFake(t, body(cat(outEnv("a", "", 0), outEnv("b", "", 0), resultEnv(ans), endEnv(nil))))
	mine := errors.New("the caller's own")
	n := 0
	_, err := newClient(t, f.url).RunStream(context.Background(), streamReq, func(OutputChunk) error { n++; return mine })
	if err != mine || n != 1 {
		t.Fatalf("%v after %d chunks", err, n)
	}
}

func TestCellStreamExtendsTheChain(t *testing.T) {
	cell := &Cell{Language: "python", Code: "print(1)"}
	hashed := map[string]any{"cell": map[string]any{"language": "python", "code": "print(1)"}}
	ans := answerWith(t, hashed, "1\n", "", nil, "process")
	f := newRawFake(t, body(cat(outEnv("1\n", "", 0), resultEnv(ans), endEnv(nil))))
	c := newClient(t, f.url)
	s := &Session{ID: "s1", c: c, chain: record.NewChain("")}
	got := 0
	res, err := s.CellStream(context.Background(), cell, 0, func(OutputChunk) error { got++; return nil })
	if err != nil || res.Stdout != "1\n" || got != 1 || s.Chain().Head() != ans["record"].(map[string]any)["digest"] {
		t.Fatalf("%v %+v %d", err, res, got)
	}
	r := f.reqs[0]
	if r.path != "/plimsoll.v1.SandboxService/RunCellStream" ||
		string(r.body[5:]) != `{"cell":{"code":"print(1)","language":"python"},"session_id":"s1"}` {
		t.Fatalf("sent %s %q", r.path, r.body)
	}
	// the same record again does not extend the chain
	if _, err := s.CellStream(context.Background(), cell, 0, nil); !errors.Is(err, record.ErrChain) {
		t.Fatalf("%v", err)
	}
	if _, err := c.RunCellStream(context.Background(), &RunCellRequest{SessionID: "s1", Cell: cell}, nil); err != nil {
		t.Fatalf("the low-level call checks the record alone: %v", err)
	}
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// Tests that need no daemon: what is sent, how answers are read, retries.
// A fake daemon (httptest) answers with records it computes itself.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"plimsoll/record"
)

// fake is a scripted daemon: each call takes the next answer.
type fake struct {
	mu      sync.Mutex
	bodies  []string
	headers []http.Header
	paths   []string
	answer  func(n int, path string, body []byte) (int, any)
	prev    string
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, string(body))
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	status, v := f.answer(n, r.URL.Path, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if s, ok := v.(string); ok {
		io.WriteString(w, s)
		return
	}
	json.NewEncoder(w).Encode(v)
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func newFake(t *testing.T, answer func(n int, path string, body []byte) (int, any)) (*fake, string) {
	f := &fake{answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// ran builds a 200 answer to the request body, with a record as the daemon
// computes it. hashed is the part of the body the request digest covers.
func ran(t *testing.T, hashed any, stdout, isolation, previous string) map[string]any {
	resp := map[string]any{"exit_code": 0, "stdout": stdout, "stderr": "", "stdout_truncated": false,
		"stderr_truncated": false, "duration_ms": 1, "sandbox_name": "fake", "isolation": isolation,
		"timed_out": false, "out_of_memory": false, "outcome": "completed", "detail": "", "steps": []any{}}
	reqH, err := record.SHA256Hex(hashed)
	if err != nil {
		t.Error(err)
	}
	respH, _ := record.SHA256Hex(resp)
	rec := map[string]any{"version": 1, "request_sha256": reqH, "response_sha256": respH,
		"provider": "fake", "isolation": isolation, "runtime": "", "previous_digest": previous,
		"started_at": "2026-11-30T01:02:03.000000001Z", "ended_at": "2026-11-30T01:02:03.000000002Z",
		"broker_calls": 0, "broker_refused": 0}
	rec["digest"], _ = record.SHA256Hex(rec)
	resp["record"] = rec
	return resp
}

// reseal recomputes an altered answer's record, as a daemon that lies
// consistently would.
func reseal(resp map[string]any) {
	rec := resp["record"].(map[string]any)
	delete(resp, "record")
	rec["response_sha256"], _ = record.SHA256Hex(resp)
	delete(rec, "digest")
	rec["digest"], _ = record.SHA256Hex(rec)
	resp["record"] = rec
}

func refusal(reason, code string, md map[string]string) map[string]any {
	return map[string]any{"code": code, "message": "refused: " + reason, "details": []any{
		map[string]any{"type": "google.rpc.ErrorInfo", "value": "",
			"debug": map[string]any{"reason": reason, "domain": "plimsoll", "metadata": md}}}}
}

func bodyValue(t *testing.T, body []byte) map[string]any {
	v, err := record.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func newClient(t *testing.T, url string, opts ...Option) *Client {
	c, err := NewClient(url, "k", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSendsOnlyWhatWasSet(t *testing.T) {
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		return 200, ran(t, bodyValue(t, body), "", "process", "")
	})
	c := newClient(t, url)
	ctx := context.Background()
	if _, err := c.Run(ctx, &RunRequest{Snippet: &Snippet{Language: "python", Code: "print('<&>')"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, &RunRequest{TimeoutMs: 250, Project: &Project{
		Files: []File{{Path: "a.py"}, BinaryFile("b.bin", []byte{0xff})},
		Steps: []Step{{Argv: []string{"python3", "a.py"}}}}}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"snippet":{"code":"print('<&>')","language":"python"}}`,
		`{"project":{"files":[{"content":"","path":"a.py"},{"content_base64":"/w==","path":"b.bin"}],"steps":[{"argv":["python3","a.py"]}]},"timeout_ms":250}`,
	}
	for i, w := range want {
		if f.bodies[i] != w {
			t.Errorf("sent\n%s\nwant\n%s", f.bodies[i], w)
		}
	}
	h := f.headers[0]
	if h.Get("Content-Type") != "application/json" || h.Get("Connect-Protocol-Version") != "1" ||
		h.Get("Authorization") != "Bearer k" || f.paths[0] != "/plimsoll.v1.SandboxService/Run" {
		t.Fatalf("headers %v path %s", h, f.paths[0])
	}
}

func TestCellDigestLeavesOutSessionID(t *testing.T) {
	var prev string
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		v := bodyValue(t, body)
		if strings.HasSuffix(path, "/OpenSession") {
			return 200, map[string]any{"session_id": strings.Repeat("ab", 32)}
		}
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
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "1"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cell(ctx, &Cell{Language: "python", Code: "2"}, 500); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, py("3")); err != nil {
		t.Fatal(err)
	}
	if f.bodies[0] != `{}` || f.bodies[1] != `{"cell":{"code":"1","language":"python"},"session_id":"`+s.ID+`"}` ||
		f.bodies[2] != `{"cell":{"code":"2","language":"python"},"session_id":"`+s.ID+`","timeout_ms":500}` {
		t.Fatalf("sent %q", f.bodies)
	}
	ch := s.Chain()
	if ch.Len() != 3 || ch.Head() != prev {
		t.Fatalf("chain %d head %s", ch.Len(), ch.Head())
	}
	if e := ch.Entries()[0]; !strings.Contains(mustCanon(t, e.Request), `"cell"`) ||
		strings.Contains(mustCanon(t, e.Request), "session_id") {
		t.Fatalf("entry request %s", mustCanon(t, e.Request))
	}
	// A record that does not name the head breaks the chain and is not kept.
	prev = "0000"
	_, err = s.Cell(ctx, &Cell{Language: "python", Code: "4"}, 0)
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != "previous_digest" || ce.Index != 3 || ch.Len() != 3 {
		t.Fatalf("%v", err)
	}
}

func mustCanon(t *testing.T, v any) string {
	b, err := record.Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRecordChecksOnRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(resp map[string]any)
		broken string
	}{
		{"no record", func(r map[string]any) { delete(r, "record") }, "version"},
		{"answer altered", func(r map[string]any) { r["stdout"] = "forged" }, "response_sha256"},
		{"a session's record", func(r map[string]any) {
			r["record"].(map[string]any)["previous_digest"] = "ab"
			reseal(r)
		}, "previous_digest"},
		{"ends before it starts", func(r map[string]any) {
			r["record"].(map[string]any)["ended_at"] = "2026-11-30T01:02:02.999999999Z"
			reseal(r)
		}, "ended_at"},
		{"version 2", func(r map[string]any) {
			r["record"].(map[string]any)["version"] = 2
			reseal(r)
		}, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
				r := ran(t, bodyValue(t, body), "ok", "process", "")
				tc.mutate(r)
				return 200, r
			})
			_, err := newClient(t, url).Run(context.Background(), py("1"))
			var ce *record.ChainError
			if !errors.As(err, &ce) || ce.Broken != tc.broken || !errors.Is(err, record.ErrChain) {
				t.Fatalf("want %s, got %v", tc.broken, err)
			}
			// Off, the same answer is a result.
			res, err := newClient(t, url, WithRecordVerification(false)).Run(context.Background(), py("1"))
			if err != nil || res == nil {
				t.Fatalf("verification off: %v", err)
			}
		})
	}
}

func TestTierRecheck(t *testing.T) {
	for _, tc := range []struct {
		answer, rec string
		ok          bool
	}{
		{"kernel", "kernel", true},
		{"vm", "kernel", true},
		{"container", "kernel", false},
		{"kernel", "process", false},
		{"gvisor", "kernel", false}, // an unknown tier is below every floor
	} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
			r := ran(t, bodyValue(t, body), "", tc.rec, "")
			r["isolation"] = tc.answer
			reseal(r)
			return 200, r
		})
		req := py("1")
		req.MinimumIsolation = TierKernel
		_, err := newClient(t, url).Run(context.Background(), req)
		if tc.ok {
			if err != nil {
				t.Errorf("%s/%s: %v", tc.answer, tc.rec, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrIsolationEvidenceMismatch) || e.Code != "data_loss" || !e.Dispatched {
			t.Errorf("%s/%s: want a mismatch, got %v", tc.answer, tc.rec, err)
		}
	}
}

func TestErrorDecoding(t *testing.T) {
	// The ErrorInfo as protobuf only: reason "AT_CAPACITY", metadata
	// dispatched=false.
	pb := []byte{0x0a, 0x0b}
	pb = append(pb, "AT_CAPACITY"...)
	entry := append([]byte{0x0a, 0x0a}, "dispatched"...)
	entry = append(entry, 0x12, 0x05)
	entry = append(entry, "false"...)
	pb = append(pb, 0x1a, byte(len(entry)))
	pb = append(pb, entry...)
	answers := []struct {
		status int
		body   any
		check  func(error) bool
	}{
		{429, map[string]any{"code": "resource_exhausted", "message": "busy", "details": []any{
			map[string]any{"type": "google.rpc.ErrorInfo", "value": base64.RawStdEncoding.EncodeToString(pb)}}},
			func(err error) bool {
				var e *Error
				return errors.As(err, &e) && errors.Is(err, ErrAtCapacity) && !e.Dispatched && e.HTTPStatus == 429
			}},
		{400, refusal("SESSION_ENDED", "failed_precondition", map[string]string{"dispatched": "false", "ended_reason": "lifetime"}),
			func(err error) bool {
				var se *SessionEndedError
				var e *Error
				return errors.As(err, &se) && se.Reason == "lifetime" && errors.Is(err, ErrSessionEnded) &&
					errors.As(err, &e) && e.Reason == "SESSION_ENDED"
			}},
		{400, refusal("SESSION_ENDED", "failed_precondition", map[string]string{"dispatched": "false"}),
			func(err error) bool {
				var se *SessionEndedError
				return errors.As(err, &se) && se.Reason == "refused: SESSION_ENDED"
			}},
		{400, refusal("SOMETHING_NEW", "failed_precondition", map[string]string{"dispatched": "false"}),
			func(err error) bool {
				var e *Error
				if !errors.As(err, &e) || e.Reason != "SOMETHING_NEW" {
					return false
				}
				for _, s := range sentinels {
					if errors.Is(err, s) {
						return false
					}
				}
				return true
			}},
		{500, refusal("INTERNAL", "internal", map[string]string{"dispatched": "true"}),
			func(err error) bool {
				var e *Error
				return errors.As(err, &e) && errors.Is(err, ErrInfrastructure) && e.Dispatched
			}},
		{502, "<html>bad gateway</html>", func(err error) bool {
			var e *Error
			return errors.As(err, &e) && errors.Is(err, ErrInfrastructure) && e.Dispatched && e.HTTPStatus == 502
		}},
		{200, "not json", func(err error) bool { return errors.Is(err, ErrInfrastructure) }},
	}
	for i, a := range answers {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) { return a.status, a.body })
		_, err := newClient(t, url, WithRetry(RetryPolicy{MaxAttempts: 1})).Run(context.Background(), py("1"))
		if !a.check(err) {
			t.Errorf("answer %d: %v (%#v)", i, err, err)
		}
	}
}

func TestRetriesOnlyCapacityAndRate(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, Base: time.Millisecond, Cap: 4 * time.Millisecond}
	for _, tc := range []struct {
		reason, code string
		status, want int
	}{
		{"AT_CAPACITY", "resource_exhausted", 429, 3},
		{"RATE_LIMITED", "resource_exhausted", 429, 3},
		{"INTERNAL", "internal", 500, 1},
		{"NOT_READY", "unavailable", 503, 1},
		{"INVALID_REQUEST", "invalid_argument", 400, 1},
	} {
		f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
			return tc.status, refusal(tc.reason, tc.code, map[string]string{"dispatched": "false"})
		})
		_, err := newClient(t, url, WithRetry(policy)).Run(context.Background(), py("1"))
		if err == nil || f.count() != tc.want {
			t.Errorf("%s: %d attempts (want %d), %v", tc.reason, f.count(), tc.want, err)
		}
		// Off by default.
		f2, url2 := newFake(t, func(n int, path string, body []byte) (int, any) {
			return tc.status, refusal(tc.reason, tc.code, map[string]string{"dispatched": "false"})
		})
		newClient(t, url2).Run(context.Background(), py("1"))
		if f2.count() != 1 {
			t.Errorf("%s: retried without a policy", tc.reason)
		}
	}
	// Busy twice, then it runs.
	f, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		if n < 2 {
			return 429, refusal("AT_CAPACITY", "resource_exhausted", map[string]string{"dispatched": "false"})
		}
		return 200, ran(t, bodyValue(t, body), "ran", "process", "")
	})
	res, err := newClient(t, url, WithRetry(policy)).Run(context.Background(), py("1"))
	if err != nil || res.Stdout != "ran" || f.count() != 3 {
		t.Fatalf("%v after %d attempts", err, f.count())
	}
}

func TestRetryHonoursContext(t *testing.T) {
	_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		return 429, refusal("RATE_LIMITED", "resource_exhausted", map[string]string{"dispatched": "false"})
	})
	c := newClient(t, url, WithRetry(RetryPolicy{MaxAttempts: 5, Base: 10 * time.Second, Cap: 10 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Run(ctx, py("1"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

func TestJitter(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 4, Base: 100 * time.Millisecond, Cap: 2 * time.Second}
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000}
	for n, w := range want {
		if d := p.Delay(n); d != w*time.Millisecond {
			t.Errorf("delay %d = %v, want %v", n, d, w*time.Millisecond)
		}
	}
	if d := (RetryPolicy{}).Delay(40); d != 2*time.Second {
		t.Errorf("defaults: %v", d)
	}
	c := newClient(t, "http://127.0.0.1:1")
	d := 400 * time.Millisecond
	low, high := false, false
	for i := 0; i < 2000; i++ {
		j := c.jitter(d)
		if j < d/2 || j > d {
			t.Fatalf("jitter %v outside [%v, %v]", j, d/2, d)
		}
		low = low || j < d/2+d/20
		high = high || j > d-d/20
	}
	if !low || !high {
		t.Fatal("the jitter does not spread over [d/2, d]")
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	_, err := newClient(t, srv.URL, WithTimeout(100*time.Millisecond)).Run(context.Background(), py("1"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInfrastructure) || !e.Dispatched ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

func TestStdoutBytes(t *testing.T) {
	r := &Result{Stdout: "\ufffd", StdoutBase64: base64.StdEncoding.EncodeToString([]byte{0xff, 0}), Stderr: "e"}
	if b := r.StdoutBytes(); string(b) != "\xff\x00" || string(r.StderrBytes()) != "e" {
		t.Fatalf("%q", b)
	}
}

func TestNewClientURLs(t *testing.T) {
	for _, u := range []string{"localhost:7475", "ftp://x", "unix:"} {
		if _, err := NewClient(u, "k"); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:7475/", "https://h", "unix:/run/plimsoll.sock"} {
		if _, err := NewClient(u, "k"); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

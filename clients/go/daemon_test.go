// SPDX-License-Identifier: Apache-2.0
package plimsoll

// Tests against real daemons: run under the clients' harness, which starts
// them and exports their addresses (docs/clients.md):
//
//	python3 tests/clients/harness.py -- clients/go/run-tests

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"plimsoll/record"
)

const underHarness = "run the suite under the clients' harness: python3 tests/clients/harness.py -- clients/go/run-tests (from the repository root)"

// need returns an environment variable the harness sets, failing the test
// when it is unset: these tests must not pass by not running.
func need(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is unset; %s", name, underHarness)
	}
	return v
}

func client(t *testing.T, urlVar string, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(need(t, urlVar), need(t, "PLIMSOLL_TEST_KEY"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// show prints an answer as it came.
func show(r *Result) string {
	if r == nil {
		return "<nil>"
	}
	return string(r.Raw)
}

func js(code string) *RunRequest {
	return &RunRequest{Snippet: &Snippet{Language: "javascript", Code: code}}
}

func wantRefusal(t *testing.T, err, sentinel error) *Error {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("want %v, got %v", sentinel, err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not an *Error", err)
	}
	return e
}

func TestDescribe(t *testing.T) {
	d, err := client(t, "PLIMSOLL_TEST_URL").Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Provider != "wasm" || d.Isolation != TierProcess || !d.Ready {
		t.Fatalf("describe: provider %q isolation %q ready %v", d.Provider, d.Isolation, d.Ready)
	}
	if !d.Operations.Snippet.Supported || !d.Operations.Module.Supported || d.SupportsSessions {
		t.Fatalf("operations: %+v sessions %v", d.Operations, d.SupportsSessions)
	}
	if d.Limits.MaxSnippetBytes != 262144 || !strings.HasPrefix(d.Version, "plimsolld ") {
		t.Fatalf("limits %+v version %q", d.Limits, d.Version)
	}
}

func TestRunSnippet(t *testing.T) {
	res, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), js("console.log(1+1)"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "2\n" || string(res.StdoutBytes()) != "2\n" ||
		res.Outcome != "completed" || res.Isolation != TierProcess {
		t.Fatalf("result %s", show(res))
	}
	if res.Record == nil {
		t.Fatal("no record")
	}
	// The request digest covers exactly the proto-named fields that were set.
	want, _ := record.SHA256Hex(json.RawMessage(`{"snippet":{"code":"console.log(1+1)","language":"javascript"}}`))
	if res.Record.RequestSHA256 != want || res.Record.Version != 1 || res.Record.PreviousDigest != "" ||
		res.Record.Provider != "wasm" {
		t.Fatalf("record %+v (want request_sha256 %s)", res.Record, want)
	}
	// The record checks out on its own too.
	if err := record.CheckRecord(json.RawMessage(`{"snippet":{"language":"javascript","code":"console.log(1+1)"}}`),
		res.Raw, *res.Record, new(string)); err != nil {
		t.Fatal(err)
	}
}

func TestRunSnippetThatThrows(t *testing.T) {
	res, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), js(`throw new Error("boom")`))
	if err != nil {
		t.Fatalf("a guest's failure must be a result, got %v", err)
	}
	if res.ExitCode == 0 || res.Record == nil {
		t.Fatalf("exit code %d, record %v", res.ExitCode, res.Record)
	}
}

func TestRunModule(t *testing.T) {
	wasm, err := os.ReadFile(need(t, "PLIMSOLL_TEST_WASM_MODULE"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), &RunRequest{Module: WasmModule(wasm), TimeoutMs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(string(res.StdoutBytes()), "hello, world") {
		t.Fatalf("result %s", show(res))
	}
}

func TestFloorAboveTier(t *testing.T) {
	req := js("console.log(1)")
	req.MinimumIsolation = TierVM
	_, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), req)
	e := wantRefusal(t, err, ErrInsufficientIsolation)
	if e.Dispatched || e.Metadata["isolation"] != TierProcess || e.Code != "failed_precondition" ||
		e.HTTPStatus != 400 || e.Reason != "INSUFFICIENT_ISOLATION" {
		t.Fatalf("refusal %+v", e)
	}
	if errors.Is(err, ErrInfrastructure) || errors.Is(err, ErrInvalidRequest) {
		t.Fatal("matches another sentinel")
	}
}

func TestSnippetTooBig(t *testing.T) {
	_, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), js(strings.Repeat(" ", 262145)))
	if e := wantRefusal(t, err, ErrInvalidRequest); e.Dispatched {
		t.Fatal("dispatched")
	}
	// 262144 bytes is still a snippet.
	if _, err := client(t, "PLIMSOLL_TEST_URL").Run(ctxT(t), js(strings.Repeat(" ", 262143)+"1")); err != nil {
		t.Fatalf("a snippet of exactly 262144 bytes: %v", err)
	}
}

func TestBadKey(t *testing.T) {
	c, err := NewClient(need(t, "PLIMSOLL_TEST_URL"), "plk_not-a-key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctxT(t), js("console.log(1)"))
	if e := wantRefusal(t, err, ErrUnauthenticated); e.HTTPStatus != 401 {
		t.Fatalf("refusal %+v", e)
	}
}

func TestDisabled(t *testing.T) {
	_, err := client(t, "PLIMSOLL_TEST_DISABLED_URL").Run(ctxT(t), js("console.log(1)"))
	wantRefusal(t, err, ErrDisabled)
}

func TestOpenSessionUnsupported(t *testing.T) {
	_, err := client(t, "PLIMSOLL_TEST_URL").OpenSession(ctxT(t), &OpenSessionRequest{Languages: []string{"python"}})
	wantRefusal(t, err, ErrUnsupported)
}

func proxyCount(t *testing.T) int {
	t.Helper()
	r, err := http.Get(need(t, "PLIMSOLL_TEST_LOWERING_URL") + "/__proxy/count")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var v struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Count
}

func TestIsolationEvidenceMismatch(t *testing.T) {
	req := js("console.log(1)")
	req.MinimumIsolation = TierProcess
	for _, opts := range [][]Option{nil, {WithRetry(DefaultRetryPolicy)}} {
		before := proxyCount(t)
		_, err := client(t, "PLIMSOLL_TEST_LOWERING_URL", opts...).Run(ctxT(t), req)
		e := wantRefusal(t, err, ErrIsolationEvidenceMismatch)
		if !e.Dispatched || e.Code != "data_loss" || e.Metadata["isolation"] != TierNone {
			t.Fatalf("mismatch %+v", e)
		}
		if errors.Is(err, record.ErrChain) {
			t.Fatal("the tier is checked before the record")
		}
		if n := proxyCount(t) - before; n != 1 {
			t.Fatalf("%d requests went through the proxy; a mismatch is never retried", n)
		}
	}
	// Without a floor there is nothing to re-check, and the record (whose
	// response hash covers the daemon's answer, not the rewritten one) fails.
	_, err := client(t, "PLIMSOLL_TEST_LOWERING_URL").Run(ctxT(t), js("console.log(1)"))
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != record.CheckResponseSHA256 {
		t.Fatalf("want a response_sha256 chain error, got %v", err)
	}
}

func TestRateLimited(t *testing.T) {
	c := client(t, "PLIMSOLL_TEST_RATE_URL")
	if _, err := c.Run(ctxT(t), js("console.log(1)")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Run(ctxT(t), js("console.log(2)"))
	if e := wantRefusal(t, err, ErrRateLimited); e.HTTPStatus != 429 || e.Dispatched {
		t.Fatalf("refusal %+v", e)
	}
	// The other caller's bucket, with retries: the second run waits.
	cb, err := NewClient(need(t, "PLIMSOLL_TEST_RATE_URL"), need(t, "PLIMSOLL_TEST_KEY_B"),
		WithRetry(RetryPolicy{MaxAttempts: 6, Base: 250 * time.Millisecond, Cap: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Run(ctxT(t), js("console.log(1)")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cb.Run(ctxT(t), js("console.log(2)")); err != nil {
		t.Fatalf("with retries the second run should succeed: %v", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("the second run did not wait (%v): the bucket should have been empty", waited)
	}
}

// waitInFlight waits until the daemon's plimsoll_in_flight gauge is not 0.
func waitInFlight(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+need(t, "PLIMSOLL_TEST_KEY"))
		if r, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(r.Body)
			r.Body.Close()
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "plimsoll_in_flight ") && strings.TrimSpace(line[len("plimsoll_in_flight "):]) != "0" {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the long run never showed in plimsoll_in_flight")
}

func TestAtCapacity(t *testing.T) {
	c := client(t, "PLIMSOLL_TEST_CAPACITY_URL")
	var wg sync.WaitGroup
	var long *Result
	var longErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		req := js("for(;;){}")
		req.TimeoutMs = 1500
		long, longErr = c.Run(context.Background(), req)
	}()
	waitInFlight(t, need(t, "PLIMSOLL_TEST_CAPACITY_URL"))
	_, err := c.Run(ctxT(t), js("console.log(1)"))
	if e := wantRefusal(t, err, ErrAtCapacity); e.HTTPStatus != 429 || e.Dispatched {
		t.Fatalf("refusal %+v", e)
	}
	rc := client(t, "PLIMSOLL_TEST_CAPACITY_URL",
		WithRetry(RetryPolicy{MaxAttempts: 10, Base: 100 * time.Millisecond, Cap: time.Second}))
	res, err := rc.Run(ctxT(t), js("console.log(1)"))
	if err != nil {
		t.Fatalf("with retries the run should get the slot: %v", err)
	}
	wg.Wait()
	if longErr != nil || !long.TimedOut || res.Stdout != "1\n" {
		t.Fatalf("the long run: %s %v; the retried run: %s", show(long), longErr, show(res))
	}
}

func TestDeadDaemon(t *testing.T) {
	_, err := client(t, "PLIMSOLL_TEST_DEAD_URL").Run(ctxT(t), js("console.log(1)"))
	e := wantRefusal(t, err, ErrInfrastructure)
	if !e.Dispatched || e.HTTPStatus != 0 {
		t.Fatalf("error %+v", e)
	}
	_, err = client(t, "PLIMSOLL_TEST_DEAD_URL").Describe(ctxT(t))
	wantRefusal(t, err, ErrInfrastructure)
}

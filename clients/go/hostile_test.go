// SPDX-License-Identifier: Apache-2.0
package plimsoll

// The client against the hostile daemon of tests/clients/harness.py, which
// serves tests/vectors/hostile_answers.json: huge, nested, wrong-typed,
// NUL-holding and slow answers (docs/clients.md, "What a client reads").

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type hostileCase struct {
	Name    string          `json:"name"`
	What    string          `json:"what"`
	Call    string          `json:"call"`
	Request json.RawMessage `json:"request"`
	Client  struct {
		TimeoutMs      int64 `json:"timeout_ms"`
		MaxAnswerBytes int64 `json:"max_answer_bytes"`
	} `json:"client"`
	Expect struct {
		Outcomes []string `json:"outcomes"`
		Reason   string   `json:"reason"`
		WithinMs int64    `json:"within_ms"`
		Result   *struct {
			ExitCode int32  `json:"exit_code"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
		} `json:"result"`
	} `json:"expect"`
}

type hostileVectors struct {
	Limits struct {
		MaxAnswerBytes int64 `json:"max_answer_bytes"`
		MaxDepth       int   `json:"max_depth"`
		MaxInteger     int64 `json:"max_integer"`
	} `json:"limits"`
	Cases []hostileCase `json:"cases"`
}

func loadHostile(t *testing.T) hostileVectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "vectors", "hostile_answers.json"))
	if err != nil {
		t.Fatalf("reading the shared vectors: %v", err)
	}
	var v hostileVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHostileLimitsAreTheSharedOnes(t *testing.T) {
	v := loadHostile(t)
	c, err := NewClient("http://x", "k")
	if err != nil {
		t.Fatal(err)
	}
	if DefaultMaxAnswerBytes != v.Limits.MaxAnswerBytes || c.MaxAnswerBytes() != v.Limits.MaxAnswerBytes ||
		MaxAnswerDepth != v.Limits.MaxDepth || MaxAnswerInteger != v.Limits.MaxInteger {
		t.Fatalf("limits %d %d %d %d, the vectors say %+v", DefaultMaxAnswerBytes, c.MaxAnswerBytes(),
			MaxAnswerDepth, MaxAnswerInteger, v.Limits)
	}
}

// hostileOutcome makes the case's call: "result" and the answer, or the
// kind of error and the error.
func hostileOutcome(t *testing.T, base string, hc hostileCase) (string, any, error) {
	var opts []Option
	if hc.Client.TimeoutMs > 0 {
		opts = append(opts, WithTimeout(time.Duration(hc.Client.TimeoutMs)*time.Millisecond))
	}
	if hc.Client.MaxAnswerBytes > 0 {
		opts = append(opts, WithMaxAnswerBytes(hc.Client.MaxAnswerBytes))
	}
	c, err := NewClient(base+"/"+hc.Name, "plk_hostile", opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var res any
	switch hc.Call {
	case "Run":
		var req RunRequest
		if err := json.Unmarshal(hc.Request, &req); err != nil {
			t.Fatal(err)
		}
		res, err = c.Run(ctx, &req)
	case "Describe":
		res, err = c.Describe(ctx)
	case "OpenSession":
		res, err = c.OpenSession(ctx, nil)
	default:
		t.Fatalf("no such call in the vectors: %s", hc.Call)
	}
	var e *Error
	switch {
	case err == nil:
		return "result", res, nil
	case errors.Is(err, ErrProtocol):
		return "protocol", nil, err
	case errors.Is(err, ErrIsolationEvidenceMismatch):
		return "mismatch", nil, err
	case errors.Is(err, ErrInfrastructure) && errors.As(err, &e) && e.Code == "deadline_exceeded":
		return "timeout", nil, err
	case errors.Is(err, ErrInfrastructure):
		return "transport", nil, err
	case errors.As(err, &e) && e.Reason != ReasonIsolationEvidenceMismatch:
		return "refusal", nil, err
	}
	return "untyped", nil, err
}

func TestHostileAnswers(t *testing.T) {
	base := need(t, "PLIMSOLL_TEST_HOSTILE_URL")
	v := loadHostile(t)
	if len(v.Cases) < 40 {
		t.Fatalf("only %d hostile cases", len(v.Cases))
	}
	for _, hc := range v.Cases {
		hc := hc
		t.Run(hc.Name, func(t *testing.T) {
			t0 := time.Now()
			got, res, err := hostileOutcome(t, base, hc)
			took := time.Since(t0)
			ok := false
			for _, o := range hc.Expect.Outcomes {
				ok = ok || o == got
			}
			if !ok {
				t.Fatalf("%s: want %v, got %s: %v", hc.What, hc.Expect.Outcomes, got, err)
			}
			if hc.Expect.WithinMs > 0 && took > time.Duration(hc.Expect.WithinMs)*time.Millisecond {
				t.Fatalf("%s: took %v", hc.What, took)
			}
			var e *Error
			errors.As(err, &e)
			switch got {
			case "result":
				if r, isRun := res.(*Result); isRun && hc.Expect.Result != nil {
					w := hc.Expect.Result
					if r.ExitCode != w.ExitCode || r.Stdout != w.Stdout || r.Stderr != w.Stderr {
						t.Fatalf("got exit %d stdout %q stderr %q, want %+v", r.ExitCode, r.Stdout, r.Stderr, *w)
					}
					if r.Record == nil || r.Record.Digest == "" {
						t.Fatal("no checked record")
					}
				}
			case "refusal":
				if e.Reason != hc.Expect.Reason || e.Dispatched {
					t.Fatalf("refusal %s dispatched %v, want %s", e.Reason, e.Dispatched, hc.Expect.Reason)
				}
			default:
				if !e.Dispatched {
					t.Fatalf("%v: not dispatched", err)
				}
			}
		})
	}
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// The client's reasons against tests/vectors/reasons.json, the daemon's
// table: entry for entry, both ways (docs/clients.md, "Typed refusals").

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

type reasonEntry struct {
	Reason     string `json:"reason"`
	Code       string `json:"code"`
	HTTPStatus int    `json:"http_status"`
	Dispatched bool   `json:"dispatched"`
	Channel    string `json:"channel"`
	Retried    bool   `json:"retried"`
}

func loadReasons(t *testing.T) map[string]reasonEntry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "vectors", "reasons.json"))
	if err != nil {
		t.Fatalf("reading the shared vectors: %v", err)
	}
	var v struct {
		Reasons []reasonEntry `json:"reasons"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	m := map[string]reasonEntry{}
	for _, r := range v.Reasons {
		m[r.Reason] = r
	}
	if len(m) != len(v.Reasons) || len(m) < 10 {
		t.Fatalf("%d reasons, %d distinct", len(v.Reasons), len(m))
	}
	return m
}

// clientOnly are the reasons the client gives errors it decides itself.
var clientOnly = map[string]bool{ReasonTransport: true, ReasonProtocol: true, ReasonIsolationEvidenceMismatch: true,
	ReasonConfiguration: true}

// TestReasonTableIsTheFiles: every daemon reason the client has a sentinel
// for is in the file, in the same channel, retried as the file says.
func TestReasonTableIsTheFiles(t *testing.T) {
	file := loadReasons(t)
	var retried, want []string
	for reason, sentinel := range sentinels {
		if clientOnly[reason] {
			continue
		}
		e, ok := file[reason]
		if !ok {
			t.Errorf("the client has %v for %s, which the daemon does not send", sentinel, reason)
			continue
		}
		channel := "refusal"
		if sentinel == ErrInfrastructure {
			channel = "infrastructure"
		}
		if e.Channel != channel {
			t.Errorf("%s: the client's channel is %s, the file's %s", reason, channel, e.Channel)
		}
		if retryable(&Error{Reason: reason}) {
			retried = append(retried, reason)
		}
	}
	for reason, e := range file {
		if e.Retried {
			want = append(want, reason)
		}
	}
	sort.Strings(retried)
	sort.Strings(want)
	if !reflect.DeepEqual(retried, want) {
		t.Errorf("the client retries %v, the file says %v", retried, want)
	}
}

// TestEveryReasonOfTheFile: each reason, answered as the daemon sends it by
// the harness's hostile daemon, is the typed error the file says.
func TestEveryReasonOfTheFile(t *testing.T) {
	base := need(t, "PLIMSOLL_TEST_HOSTILE_URL")
	for reason, want := range loadReasons(t) {
		c, err := NewClient(base+"/reason/"+reason, "plk_reasons")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Run(ctxT(t), js("console.log(1)"))
		sentinel, known := sentinels[reason]
		if !known || clientOnly[reason] {
			t.Errorf("%s: the client has no sentinel for it (%v)", reason, err)
			continue
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: %v does not match %v", reason, err, sentinel)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: %v is not an *Error", reason, err)
			continue
		}
		infra := errors.Is(err, ErrInfrastructure)
		if infra != (want.Channel == "infrastructure") || errors.Is(err, ErrProtocol) {
			t.Errorf("%s: infrastructure %v, the file's channel is %s", reason, infra, want.Channel)
		}
		got := reasonEntry{Reason: e.Reason, Code: e.Code, HTTPStatus: e.HTTPStatus, Dispatched: e.Dispatched,
			Channel: want.Channel, Retried: retryable(err)}
		if got != want {
			t.Errorf("%s: the client says %+v, the file %+v", reason, got, want)
		}
		if reason == "SESSION_ENDED" {
			var se *SessionEndedError
			if !errors.As(err, &se) {
				t.Errorf("%s: %v is not a *SessionEndedError", reason, err)
			}
		}
	}
}

// SPDX-License-Identifier: Apache-2.0
package record

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var vectors = filepath.Join("..", "..", "..", "tests", "vectors")

func load(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectors, name))
	if err != nil {
		t.Fatalf("reading the shared vectors: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestCanonicalVectors(t *testing.T) {
	var cases []struct {
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Canonical string          `json:"canonical"`
		SHA256    string          `json:"sha256"`
	}
	load(t, "canonical.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no canonical vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := Canonical(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.Canonical {
				t.Fatalf("canonical\n got %s\nwant %s", got, c.Canonical)
			}
			// The same value decoded to Go's generic types gives the same.
			v, err := Parse(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			h, err := SHA256Hex(v)
			if err != nil {
				t.Fatal(err)
			}
			if h != c.SHA256 {
				t.Fatalf("sha256 %s, want %s", h, c.SHA256)
			}
		})
	}
}

func TestCanonicalIsNotEncodingJSON(t *testing.T) {
	got, err := Canonical(map[string]any{"s": "<a> & \u2028\u2029\x7f/é", "b": []any{uint32(7), int64(-3), 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"b\":[7,-3,2],\"s\":\"<a> & \u2028\u2029\x7f/é\"}"
	if string(got) != want {
		t.Fatalf("got %q want %q", got, want)
	}
	// A struct goes through encoding/json first, keeping its field names.
	type S struct {
		TimeoutMs uint32 `json:"timeout_ms,omitempty"`
		Code      string `json:"code"`
	}
	got, err = Canonical(S{Code: "a<b"})
	if err != nil || string(got) != `{"code":"a<b"}` {
		t.Fatalf("struct: %s %v", got, err)
	}
}

func TestCanonicalRefusesFractions(t *testing.T) {
	for _, in := range []string{`{"a":1.5}`, `{"a":1e3}`, `[0.0]`} {
		if _, err := Canonical(json.RawMessage(in)); err == nil {
			t.Errorf("%s: no error for a fractional number", in)
		}
	}
	if _, err := Canonical(1.5); err == nil {
		t.Error("float 1.5: no error")
	}
	if _, err := Canonical("\xff"); err == nil {
		t.Error("invalid UTF-8: no error")
	}
	if _, err := Canonical(json.RawMessage(`{} x`)); err == nil {
		t.Error("trailing data: no error")
	}
}

func TestCanonicalUTF16KeyOrder(t *testing.T) {
	// U+FF61 sorts after U+1F600 in UTF-8 byte order but before it in
	// UTF-16 (a surrogate pair starts with 0xD83D).
	got, err := Canonical(map[string]any{"\U0001F600": 1, "\uFF61": 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"\U0001F600\":1,\"\uFF61\":2}"; string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestRecordVectors(t *testing.T) {
	var cases []struct {
		Name     string          `json:"name"`
		Request  json.RawMessage `json:"request"`
		Response json.RawMessage `json:"response"`
		Record   json.RawMessage `json:"record"`
		Valid    bool            `json:"valid"`
	}
	load(t, "records.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no record vectors")
	}
	valid, invalid := 0, 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := CheckRecord(c.Request, c.Response, c.Record, nil)
			if c.Valid {
				valid++
				if err != nil {
					t.Fatalf("a valid record failed: %v", err)
				}
				return
			}
			invalid++
			if err == nil {
				t.Fatal("an invalid record passed")
			}
			if !errors.Is(err, ErrChain) {
				t.Fatalf("error %v is not ErrChain", err)
			}
			// Decoded as a Record, the same result.
			var r Record
			if err := json.Unmarshal(c.Record, &r); err != nil {
				t.Fatal(err)
			}
			if CheckRecord(c.Request, c.Response, r, nil) == nil {
				t.Fatal("an invalid Record passed")
			}
		})
	}
	if valid == 0 || invalid == 0 {
		t.Fatalf("vectors should hold valid and invalid records: %d, %d", valid, invalid)
	}
}

type chainCase struct {
	Name    string  `json:"name"`
	Entries []Entry `json:"entries"`
	Valid   bool    `json:"valid"`
	FailsAt *int    `json:"fails_at"`
	Broken  string  `json:"broken"`
}

func TestChainVectors(t *testing.T) {
	var cases []chainCase
	load(t, "chains.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no chain vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := VerifyChain(c.Entries, "")
			if c.Valid {
				if err != nil {
					t.Fatalf("a valid chain failed: %v", err)
				}
				return
			}
			var ce *ChainError
			if !errors.As(err, &ce) || !errors.Is(err, ErrChain) {
				t.Fatalf("want a *ChainError, got %v", err)
			}
			if c.FailsAt == nil || ce.Index != *c.FailsAt || ce.Broken != c.Broken {
				t.Fatalf("failed at %d (%s), want %v (%s): %v", ce.Index, ce.Broken, *c.FailsAt, c.Broken, err)
			}
		})
	}
}

// The chain keeper, fed the vectors' entries one by one, accepts up to the
// broken entry, refuses it with the same index and check, and keeps its head.
func TestChainKeeperVectors(t *testing.T) {
	var cases []chainCase
	load(t, "chains.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ch := NewChain("")
			for i, e := range c.Entries {
				resp := map[string]any{}
				for k, v := range e.Response.(map[string]any) {
					resp[k] = v
				}
				resp["record"] = e.Record.Map()
				before := ch.Head()
				r, err := ch.Append(e.Request, resp)
				if err != nil {
					var ce *ChainError
					if c.Valid || !errors.As(err, &ce) || c.FailsAt == nil || i != *c.FailsAt ||
						ce.Index != i || ce.Broken != c.Broken {
						t.Fatalf("entry %d: %v (want fails_at %v broken %q)", i, err, c.FailsAt, c.Broken)
					}
					if ch.Head() != before || ch.Len() != i {
						t.Fatal("a refused entry moved the head")
					}
					return
				}
				if ch.Head() != r.Digest || r.Digest != e.Record.Digest {
					t.Fatalf("entry %d: head %s, record %s", i, ch.Head(), e.Record.Digest)
				}
			}
			if !c.Valid {
				t.Fatalf("the broken chain was accepted whole (fails_at %v)", *c.FailsAt)
			}
			if err := VerifyChain(ch.Entries(), ""); err != nil {
				t.Fatalf("the kept entries do not verify: %v", err)
			}
		})
	}
}

func TestCheckRecordOrder(t *testing.T) {
	var cases []chainCase
	load(t, "chains.json", &cases)
	e := cases[0].Entries[0]
	prev := "0000"
	err := CheckRecord(e.Request, e.Response, e.Record, &prev)
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Broken != CheckPreviousDigest {
		t.Fatalf("want previous_digest, got %v", err)
	}
	if err := CheckRecord(e.Request, e.Response, nil, nil); !errors.Is(err, ErrChain) ||
		!strings.Contains(err.Error(), "version") {
		t.Fatalf("a missing record: %v", err)
	}
	m := e.Record.Map()
	m["version"] = json.Number("2")
	if err := CheckRecord(e.Request, e.Response, m, nil); !errors.As(err, &ce) || ce.Broken != CheckVersion {
		t.Fatalf("version 2: %v", err)
	}
}

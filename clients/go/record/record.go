// SPDX-License-Identifier: Apache-2.0
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
)

// ErrChain is matched (errors.Is) by every *ChainError: a record that does
// not check out, or a chain that is broken.
var ErrChain = errors.New("record: chain broken")

// The names of the checks, in the order they run (docs/clients.md). A
// *ChainError's Broken is one of them.
const (
	CheckVersion        = "version"
	CheckDigest         = "digest"
	CheckRequestSHA256  = "request_sha256"
	CheckResponseSHA256 = "response_sha256"
	CheckPreviousDigest = "previous_digest"
	CheckEndedAt        = "ended_at"
)

// ChainError says which check failed first, and at which entry.
type ChainError struct {
	// Index is the entry's position in the chain (0 for a record checked
	// alone; for a session, the position the call would have taken).
	Index int
	// Broken names the first check that failed: "version", "digest",
	// "request_sha256", "response_sha256", "previous_digest" or "ended_at".
	Broken string
	// Detail says what was expected and what was found.
	Detail string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("record: chain broken at entry %d: %s: %s", e.Index, e.Broken, e.Detail)
}

// Is makes errors.Is(err, ErrChain) true.
func (e *ChainError) Is(target error) bool { return target == ErrChain }

// Record is a run record (docs/records.md). It keeps every member it was
// decoded from, so its digest is checked over exactly what the daemon sent,
// including members this version of the client does not know.
type Record struct {
	Version        int64  `json:"version"`
	RequestSHA256  string `json:"request_sha256"`
	ResponseSHA256 string `json:"response_sha256"`
	Provider       string `json:"provider"`
	Isolation      string `json:"isolation"`
	Runtime        string `json:"runtime"`
	StartedAt      string `json:"started_at"`
	EndedAt        string `json:"ended_at"`
	PreviousDigest string `json:"previous_digest"`
	BrokerCalls    int64  `json:"broker_calls"`
	BrokerRefused  int64  `json:"broker_refused"`
	Digest         string `json:"digest"`

	raw map[string]any
}

// RecordFromValue builds a Record from a decoded JSON object, keeping it
// whole. Members of an unexpected type leave their field at zero (the
// checks then fail on them).
func RecordFromValue(v map[string]any) Record {
	r := Record{raw: v}
	r.Version, _ = asInt(v["version"])
	r.RequestSHA256, _ = v["request_sha256"].(string)
	r.ResponseSHA256, _ = v["response_sha256"].(string)
	r.Provider, _ = v["provider"].(string)
	r.Isolation, _ = v["isolation"].(string)
	r.Runtime, _ = v["runtime"].(string)
	r.StartedAt, _ = v["started_at"].(string)
	r.EndedAt, _ = v["ended_at"].(string)
	r.PreviousDigest, _ = v["previous_digest"].(string)
	r.BrokerCalls, _ = asInt(v["broker_calls"])
	r.BrokerRefused, _ = asInt(v["broker_refused"])
	r.Digest, _ = v["digest"].(string)
	return r
}

// Map returns the record as a JSON object: the members it was decoded from,
// or, for a Record built field by field, its fields.
func (r Record) Map() map[string]any {
	if r.raw != nil {
		out := make(map[string]any, len(r.raw))
		for k, v := range r.raw {
			out[k] = v
		}
		return out
	}
	return map[string]any{
		"version": r.Version, "request_sha256": r.RequestSHA256,
		"response_sha256": r.ResponseSHA256, "provider": r.Provider,
		"isolation": r.Isolation, "runtime": r.Runtime,
		"started_at": r.StartedAt, "ended_at": r.EndedAt,
		"previous_digest": r.PreviousDigest, "broker_calls": r.BrokerCalls,
		"broker_refused": r.BrokerRefused, "digest": r.Digest,
	}
}

// Canonical returns the record's canonical form: what a harness signs.
func (r Record) Canonical() ([]byte, error) { return Canonical(r.Map()) }

// MarshalJSON writes the record's canonical form.
func (r Record) MarshalJSON() ([]byte, error) { return r.Canonical() }

// UnmarshalJSON keeps every member, with exact numbers.
func (r *Record) UnmarshalJSON(data []byte) error {
	v, err := Parse(data)
	if err != nil {
		return err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return errors.New("record: a record is not a JSON object")
	}
	*r = RecordFromValue(m)
	return nil
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint32:
		return int64(x), true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	}
	return 0, false
}

// timestamps are RFC 3339, UTC, with 9 fraction digits, so text order is
// time order.
var timestamp = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z$`)

// CheckRecord checks a record against the request that was sent and the
// response that came back, in the order of docs/clients.md:
//
//  1. the record is present and its version is 1;
//  2. digest is the SHA-256 of its canonical form without digest;
//  3. request_sha256 is the SHA-256 of the request's canonical form;
//  4. response_sha256 is the SHA-256 of the response's canonical form
//     without its record member (a record member in response is ignored);
//  5. previous_digest equals *previous (skipped when previous is nil);
//  6. ended_at is not before started_at.
//
// request and response are JSON values in any form Canonical takes; rec
// is a Record, a *Record, a decoded JSON object or a json.RawMessage. The
// error is a *ChainError naming the first check that failed.
func CheckRecord(request, response, rec any, previous *string) error {
	_, err := check(request, response, rec, previous, 0)
	return err
}

func fail(index int, broken, format string, args ...any) *ChainError {
	return &ChainError{Index: index, Broken: broken, Detail: fmt.Sprintf(format, args...)}
}

func check(request, response, rec any, previous *string, index int) (Record, error) {
	// 1. present, version 1.
	rv, err := toValue(rec)
	if err != nil {
		return Record{}, fail(index, CheckVersion, "the record cannot be read: %v", err)
	}
	rm, ok := rv.(map[string]any)
	if !ok {
		return Record{}, fail(index, CheckVersion, "no record in the answer")
	}
	r := RecordFromValue(rm)
	if v, ok := asInt(rm["version"]); !ok || v != 1 {
		return r, fail(index, CheckVersion, "version is %v, not 1", rm["version"])
	}
	// 2. digest.
	without := make(map[string]any, len(rm))
	for k, v := range rm {
		if k != "digest" {
			without[k] = v
		}
	}
	d, err := SHA256Hex(without)
	if err != nil {
		return r, fail(index, CheckDigest, "the record has no canonical form: %v", err)
	}
	if got, ok := rm["digest"].(string); !ok || got != d {
		return r, fail(index, CheckDigest, "digest %v, the record's canonical form hashes to %s", rm["digest"], d)
	}
	// 3. request.
	h, err := SHA256Hex(request)
	if err != nil {
		return r, fail(index, CheckRequestSHA256, "the request has no canonical form: %v", err)
	}
	if r.RequestSHA256 != h {
		return r, fail(index, CheckRequestSHA256, "request_sha256 %v, the request sent hashes to %s", rm["request_sha256"], h)
	}
	// 4. response without its record.
	resp, err := toValue(response)
	if err != nil {
		return r, fail(index, CheckResponseSHA256, "the response cannot be read: %v", err)
	}
	if m, ok := resp.(map[string]any); ok {
		if _, has := m["record"]; has {
			c := make(map[string]any, len(m))
			for k, v := range m {
				if k != "record" {
					c[k] = v
				}
			}
			resp = c
		}
	}
	h, err = SHA256Hex(resp)
	if err != nil {
		return r, fail(index, CheckResponseSHA256, "the response has no canonical form: %v", err)
	}
	if r.ResponseSHA256 != h {
		return r, fail(index, CheckResponseSHA256, "response_sha256 %v, the response hashes to %s", rm["response_sha256"], h)
	}
	// 5. previous digest.
	if previous != nil {
		if got, ok := rm["previous_digest"].(string); !ok || got != *previous {
			return r, fail(index, CheckPreviousDigest, "previous_digest %q, expected %q", r.PreviousDigest, *previous)
		}
	}
	// 6. time order.
	if !timestamp.MatchString(r.StartedAt) || !timestamp.MatchString(r.EndedAt) {
		return r, fail(index, CheckEndedAt, "started_at %q or ended_at %q is not RFC 3339 UTC with 9 fraction digits", r.StartedAt, r.EndedAt)
	}
	if r.EndedAt < r.StartedAt {
		return r, fail(index, CheckEndedAt, "ended_at %s is before started_at %s", r.EndedAt, r.StartedAt)
	}
	return r, nil
}

// Entry is one accepted call: what was sent, what came back (without its
// record), and the record.
type Entry struct {
	Request  any    `json:"request"`
	Response any    `json:"response"`
	Record   Record `json:"record"`
}

// UnmarshalJSON decodes an entry keeping every number exact.
func (e *Entry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Request  json.RawMessage `json:"request"`
		Response json.RawMessage `json:"response"`
		Record   json.RawMessage `json:"record"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	var err error
	if e.Request, err = Parse(orNull(raw.Request)); err != nil {
		return err
	}
	if e.Response, err = Parse(orNull(raw.Response)); err != nil {
		return err
	}
	e.Record = Record{}
	if v, err := Parse(orNull(raw.Record)); err != nil {
		return err
	} else if m, ok := v.(map[string]any); ok {
		e.Record = RecordFromValue(m)
	}
	return nil
}

func orNull(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// recordValue gives check what an entry's record is: nothing when it was
// never set.
func (e Entry) recordValue() any {
	if e.Record.raw == nil && e.Record.Version == 0 && e.Record.Digest == "" {
		return nil
	}
	return e.Record
}

// VerifyChain checks a kept list of entries from the start: each entry's
// record as CheckRecord does, the first one's previous_digest against
// previous ("" for a session's first call) and each later one's against
// the digest before it. The error is a *ChainError with the index of the
// first entry that fails.
func VerifyChain(entries []Entry, previous string) error {
	prev := previous
	for i, e := range entries {
		r, err := check(e.Request, e.Response, e.recordValue(), &prev, i)
		if err != nil {
			return err
		}
		prev = r.Digest
	}
	return nil
}

// Chain keeps a session's chain: it checks each (request, response) pair
// and keeps the accepted entries in order. A harness signs the last digest
// (Head), which covers every earlier record, or each record's canonical
// form. The zero Chain is empty and ready; it is safe for concurrent use.
type Chain struct {
	mu      sync.Mutex
	entries []Entry
	head    string
}

// NewChain returns a chain that expects its first record's previous_digest
// to be previous ("" for a new session).
func NewChain(previous string) *Chain { return &Chain{head: previous} }

// Append checks a response (which carries its record in its "record"
// member) against the request that was sent and the chain's head. Only when
// every check holds is the entry kept and the head advanced to its digest.
// The error is a *ChainError whose Index is the position the entry would
// have taken.
func (c *Chain) Append(request, response any) (Record, error) {
	req, err := toValue(request)
	if err != nil {
		return Record{}, &ChainError{Index: c.Len(), Broken: CheckRequestSHA256, Detail: err.Error()}
	}
	resp, err := toValue(response)
	if err != nil {
		return Record{}, &ChainError{Index: c.Len(), Broken: CheckVersion, Detail: err.Error()}
	}
	var rec any
	m, _ := resp.(map[string]any)
	if m != nil {
		rec = m["record"]
		without := make(map[string]any, len(m))
		for k, v := range m {
			if k != "record" {
				without[k] = v
			}
		}
		resp = without
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	head := c.head
	r, err := check(req, resp, rec, &head, len(c.entries))
	if err != nil {
		return r, err
	}
	c.entries = append(c.entries, Entry{Request: req, Response: resp, Record: r})
	c.head = r.Digest
	return r, nil
}

// Head is the last accepted record's digest ("" before the first).
func (c *Chain) Head() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head
}

// Len is how many entries were accepted.
func (c *Chain) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Entries returns a copy of the accepted entries, in order.
func (c *Chain) Entries() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Entry, len(c.entries))
	copy(out, c.entries)
	return out
}

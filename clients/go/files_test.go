// SPDX-License-Identifier: Apache-2.0
package plimsoll

// WriteFiles, ReadFile, ListFiles and the Session's ReadAll, Download and
// Upload against a fake daemon that keeps the files in memory and seals
// each answer's record as plimsolld does (client_test.go's fake).

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"plimsoll/record"
)

// seal adds to resp a record of hashed and resp, as the daemon computes
// it.
func seal(t *testing.T, hashed any, resp map[string]any, isolation, previous string) map[string]any {
	reqH, err := record.SHA256Hex(hashed)
	if err != nil {
		t.Error(err)
	}
	respH, err := record.SHA256Hex(resp)
	if err != nil {
		t.Error(err)
	}
	rec := map[string]any{"version": 1, "request_sha256": reqH, "response_sha256": respH,
		"provider": "fake", "isolation": isolation, "runtime": "", "previous_digest": previous,
		"started_at": "2026-11-30T01:02:03.000000001Z", "ended_at": "2026-11-30T01:02:03.000000002Z",
		"broker_calls": 0, "broker_refused": 0}
	rec["digest"], _ = record.SHA256Hex(rec)
	resp["record"] = rec
	return resp
}

// fileDaemon is a session's files as a fake daemon keeps them.
type fileDaemon struct {
	t        *testing.T
	mu       sync.Mutex
	files    map[string][]byte
	prev     string
	page     uint32                                        // a ReadFile's default limit (and most)
	writes   [][]string                                    // each WriteFiles call's paths
	wbytes   []int                                         // each WriteFiles call's bytes
	tier     string                                        // the records' tier
	tamper   func(method string, req, resp map[string]any) // before sealing
	isolated bool                                          // records name no previous (another handle's chain)
}

func newFileDaemon(t *testing.T) (*fileDaemon, *fake, *Client) {
	d := &fileDaemon{t: t, files: map[string][]byte{}, page: 1 << 20, tier: "container"}
	f, url := newFake(t, d.answer)
	return d, f, newClient(t, url)
}

func (d *fileDaemon) answer(n int, p string, body []byte) (int, any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	req := bodyValue(d.t, body)
	if req["session_id"] != sidA {
		return 404, refusal("NOT_FOUND", "not_found", nil)
	}
	delete(req, "session_id")
	method := p[strings.LastIndex(p, "/")+1:]
	var resp map[string]any
	switch method {
	case "WriteFiles":
		var paths []string
		total := 0
		for _, x := range req["files"].([]any) {
			f := x.(map[string]any)
			data := []byte(fmt.Sprint(f["content"]))
			if b64, ok := f["content_base64"].(string); ok {
				data, _ = base64.StdEncoding.DecodeString(b64)
			}
			d.files[f["path"].(string)] = data
			paths = append(paths, f["path"].(string))
			total += len(data)
		}
		if len(paths) > MaxWriteFiles || total > MaxWriteBytes {
			return 400, refusal("INVALID_REQUEST", "invalid_argument", nil)
		}
		d.writes = append(d.writes, paths)
		d.wbytes = append(d.wbytes, total)
		resp = map[string]any{"files": len(paths), "bytes": total}
	case "ReadFile":
		path := req["path"].(string)
		data, ok := d.files[path]
		if !ok {
			return 404, refusal("NOT_FOUND", "not_found", nil)
		}
		offset, limit := num(req["offset"]), num(req["limit"])
		if limit == 0 {
			limit = int(d.page)
		}
		if offset > len(data) {
			offset = len(data)
		}
		end := offset + limit
		if end > len(data) {
			end = len(data)
		}
		chunk := data[offset:end]
		resp = map[string]any{"path": path, "size": len(data), "offset": offset,
			"content": strings.ToValidUTF8(string(chunk), "\uFFFD"), "length": len(chunk), "more": end < len(data)}
		if !utf8.Valid(chunk) {
			resp["content_base64"] = base64.StdEncoding.EncodeToString(chunk)
		}
	case "ListFiles":
		var names []string
		for name := range d.files {
			names = append(names, name)
		}
		sort.Strings(names)
		entries := []any{}
		for _, name := range names {
			entries = append(entries, map[string]any{"path": name, "type": "file", "size": len(d.files[name]),
				"mode": 0o644, "modified_at": "2026-11-30T01:02:03.5Z"})
		}
		resp = map[string]any{"entries": entries, "truncated": false}
	default:
		return 404, "no such call"
	}
	if d.tamper != nil {
		d.tamper(method, req, resp)
	}
	prev := d.prev
	if d.isolated {
		prev = strings.Repeat("9e", 32)
	}
	seal(d.t, req, resp, d.tier, prev)
	d.prev = resp["record"].(map[string]any)["digest"].(string)
	return 200, resp
}

func num(v any) int {
	var n int
	if v != nil {
		fmt.Sscan(fmt.Sprint(v), &n)
	}
	return n
}

func (d *fileDaemon) session(c *Client) *Session {
	return &Session{ID: sidA, c: c, chain: record.NewChain("")}
}

func TestFileCallsSendAndRead(t *testing.T) {
	d, f, c := newFileDaemon(t)
	ctx := context.Background()
	s := d.session(c)
	bin := []byte{0, 0xff, 0xfe, 'x', '\n'}
	w, err := s.WriteFiles(ctx, []File{{Path: "a.txt", Content: "héllo\n"}, BinaryFile("d/b.bin", bin)})
	if err != nil || w.Files != 2 || w.Bytes != 7+5 || w.Record == nil || w.Record.PreviousDigest != "" || len(w.Raw) == 0 {
		t.Fatalf("%v %+v", err, w)
	}
	r, err := s.ReadFile(ctx, "a.txt", 0, 0)
	if err != nil || string(r.Content) != "héllo\n" || r.Length != 7 || r.Size != 7 || r.More || r.Offset != 0 ||
		r.Path != "a.txt" || r.Record.PreviousDigest != w.Record.Digest {
		t.Fatalf("%v %+v", err, r)
	}
	r, err = s.ReadFile(ctx, "d/b.bin", 1, 3)
	if err != nil || !bytes.Equal(r.Content, bin[1:4]) || r.Length != 3 || r.Size != 5 || !r.More || r.Offset != 1 {
		t.Fatalf("%v %+v", err, r)
	}
	l, err := s.ListFiles(ctx, "", 0)
	if err != nil || len(l.Entries) != 2 || l.Truncated {
		t.Fatalf("%v %+v", err, l)
	}
	e := l.Entries[0]
	if e.Path != "a.txt" || string(e.PathBytes) != "a.txt" || e.Type != FileTypeFile || e.Size != 7 ||
		e.Mode != 0o644 || !e.Mode.IsRegular() || e.IsDir() ||
		!e.ModifiedAt.Equal(time.Date(2026, 11, 30, 1, 2, 3, 500000000, time.UTC)) || e.ModifiedAt.Location() != time.UTC {
		t.Fatalf("%+v", e)
	}
	if _, err := s.ListFiles(ctx, "d", 3); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"files":[{"content":"héllo\n","path":"a.txt"},{"content_base64":"AP/+eAo=","path":"d/b.bin"}],"session_id":"` + sidA + `"}`,
		`{"path":"a.txt","session_id":"` + sidA + `"}`,
		`{"limit":3,"offset":1,"path":"d/b.bin","session_id":"` + sidA + `"}`,
		`{"session_id":"` + sidA + `"}`,
		`{"depth":3,"path":"d","session_id":"` + sidA + `"}`,
	}
	for i, p := range []string{"WriteFiles", "ReadFile", "ReadFile", "ListFiles", "ListFiles"} {
		if f.paths[i] != "/plimsoll.v1.SandboxService/"+p || f.bodies[i] != want[i] {
			t.Errorf("call %d: %s %s, want %s", i, f.paths[i], f.bodies[i], want[i])
		}
	}
	// Every answer joined the chain, its request without session_id.
	entries := s.Chain().Entries()
	if len(entries) != 5 || s.Chain().Head() != d.prev || record.VerifyChain(entries, "") != nil {
		t.Fatalf("chain of %d", len(entries))
	}
	if got := mustCanon(t, entries[1].Request); got != `{"path":"a.txt"}` {
		t.Fatalf("entry request %s", got)
	}
}

// A file call's record that does not name the head breaks the chain, and
// the chain stays where it was; the low-level calls check a record alone.
func TestFileCallsChain(t *testing.T) {
	d, _, c := newFileDaemon(t)
	ctx := context.Background()
	s := d.session(c)
	if _, err := s.WriteFiles(ctx, []File{{Path: "a", Content: "1"}}); err != nil {
		t.Fatal(err)
	}
	head := s.Chain().Head()
	// A low-level call: accepted alone; to the Session it is foreign.
	if _, err := c.ReadFile(ctx, sidA, "a", 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.ListFiles(ctx, "", 0)
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != record.CheckPreviousDigest || ce.Index != 1 || s.Chain().Head() != head {
		t.Fatalf("want a previous_digest chain error at 1, got %v", err)
	}
	// The low-level calls accept any previous_digest, and check the rest.
	d.isolated = true
	if _, err := c.WriteFiles(ctx, sidA, []File{{Path: "b", Content: "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListFiles(ctx, sidA, "", 0); err != nil {
		t.Fatal(err)
	}
	d.tamper = func(method string, req, resp map[string]any) { req["path"] = "other" } // hashed another request
	_, err = c.ReadFile(ctx, sidA, "a", 0, 0)
	if !errors.As(err, &ce) || ce.Broken != record.CheckRequestSHA256 {
		t.Fatalf("want a request_sha256 error, got %v", err)
	}
	if _, err := newClient(t, c.url, WithRecordVerification(false)).ReadFile(ctx, sidA, "a", 0, 0); err != nil {
		t.Fatalf("verification off: %v", err)
	}
	_, err = s.ReadFile(ctx, "a", 0, 0) // a Session checks always
	if !errors.As(err, &ce) {
		t.Fatalf("a Session with verification off: %v", err)
	}
}

// A Session's floor is checked on its file calls' records too.
func TestFileCallsFloor(t *testing.T) {
	_, _, c := newFileDaemon(t)
	ctx := context.Background()
	s := &Session{ID: sidA, c: c, chain: record.NewChain(""), floor: TierContainer}
	if _, err := s.WriteFiles(ctx, []File{{Path: "a", Content: "1"}}); err != nil {
		t.Fatal(err)
	}
	s.floor = TierKernel
	_, err := s.ReadFile(ctx, "a", 0, 0)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrIsolationEvidenceMismatch) || e.Metadata["record_isolation"] != "container" {
		t.Fatalf("want a mismatch, got %v", err)
	}
	if s.Chain().Len() != 1 {
		t.Fatal("a mismatch joined the chain")
	}
}

// What the client refuses itself, before anything is sent.
func TestFileCallsArgumentChecks(t *testing.T) {
	d, f, c := newFileDaemon(t)
	ctx := context.Background()
	s := d.session(c)
	_, err := s.WriteFiles(ctx, nil)
	if e := wantRefusal(t, err, ErrInvalidRequest); e.Dispatched || e.HTTPStatus != 0 || !strings.Contains(e.Message, "files") {
		t.Fatalf("%+v", e)
	}
	_, err = s.ReadFile(ctx, "", 0, 0)
	if e := wantRefusal(t, err, ErrInvalidRequest); !strings.Contains(e.Message, "path") {
		t.Fatalf("%+v", e)
	}
	_, err = s.ReadAll(ctx, "")
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = c.WriteFiles(ctx, "", []File{{Path: "a"}})
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = c.ReadFile(ctx, "", "a", 0, 0)
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = c.ListFiles(ctx, "", "", 0)
	wantRefusal(t, err, ErrInvalidRequest)
	if f.count() != 0 || s.Chain().Len() != 0 {
		t.Fatalf("%d calls were sent: %q", f.count(), f.bodies)
	}
}

// The daemon's refusals reach the caller typed, and leave the chain alone.
func TestFileCallsRefused(t *testing.T) {
	for _, tc := range []struct {
		status       int
		reason, code string
		sentinel     error
	}{
		{404, "NOT_FOUND", "not_found", ErrNotFound},
		{400, "INVALID_REQUEST", "invalid_argument", ErrInvalidRequest},
		{501, "UNSUPPORTED", "unimplemented", ErrUnsupported},
	} {
		_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
			return tc.status, refusal(tc.reason, tc.code, nil)
		})
		c := newClient(t, url)
		s := &Session{ID: sidA, c: c, chain: record.NewChain("")}
		ctx := context.Background()
		_, e1 := c.WriteFiles(ctx, sidA, []File{{Path: "a"}})
		_, e2 := c.ReadFile(ctx, sidA, "a", 0, 0)
		_, e3 := c.ListFiles(ctx, sidA, "", 0)
		_, e4 := s.WriteFiles(ctx, []File{{Path: "a"}})
		_, e5 := s.ReadFile(ctx, "a", 0, 0)
		_, e6 := s.ListFiles(ctx, "", 0)
		_, e7 := s.ReadAll(ctx, "a")
		e8 := s.Download(ctx, "a", filepath.Join(t.TempDir(), "a"))
		for i, err := range []error{e1, e2, e3, e4, e5, e6, e7, e8} {
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("%s, call %d: %v", tc.reason, i, err)
			}
		}
		if s.Chain().Len() != 0 {
			t.Fatal("a refusal joined the chain")
		}
	}
}

func readFileAnswer() map[string]any {
	return map[string]any{"path": "a", "size": 3, "offset": 0, "content": "abc", "length": 3, "more": false}
}

func fileEntryAnswer() map[string]any {
	return map[string]any{"path": "a", "type": "file", "size": 3, "mode": 0o644, "modified_at": "2026-11-30T01:02:03Z"}
}

// Every malformed answer is the client's protocol error, and does not join
// the chain.
func TestFileAnswersMalformed(t *testing.T) {
	set := func(name string, v any) func(map[string]any) { return func(m map[string]any) { m[name] = v } }
	entry := func(mutate func(map[string]any)) func(map[string]any) {
		return func(m map[string]any) {
			e := fileEntryAnswer()
			mutate(e)
			m["entries"] = []any{fileEntryAnswer(), e}
		}
	}
	for _, tc := range []struct {
		method, name string
		mutate       func(map[string]any)
	}{
		{"WriteFiles", "files a string", set("files", "1")},
		{"WriteFiles", "bytes negative", set("bytes", -1)},
		{"WriteFiles", "record a string", set("record", "r")},
		{"ReadFile", "content a number", set("content", 1)},
		{"ReadFile", "more a string", set("more", "false")},
		{"ReadFile", "size past uint32", set("size", int64(1)<<32)},
		{"ReadFile", "length not the content's", set("length", 2)},
		{"ReadFile", "length without content", set("content", "")},
		{"ReadFile", "content_base64 not base64", set("content_base64", "*not*")},
		{"ReadFile", "length not the decoded content's", set("content_base64", "YWJjZA==")},
		{"ReadFile", "another path", set("path", "b")},
		{"ReadFile", "another offset", set("offset", 1)},
		{"ReadFile", "no path", func(m map[string]any) { delete(m, "path") }},
		{"ListFiles", "entries an object", set("entries", map[string]any{})},
		{"ListFiles", "entries holding null", set("entries", []any{nil})},
		{"ListFiles", "truncated a number", set("truncated", 0)},
		{"ListFiles", "an unknown type", entry(set("type", "pipe"))},
		{"ListFiles", "no type", entry(func(e map[string]any) { delete(e, "type") })},
		{"ListFiles", "path_base64 not base64", entry(set("path_base64", "%%"))},
		{"ListFiles", "no path", entry(func(e map[string]any) { delete(e, "path") })},
		{"ListFiles", "mode past the permission bits", entry(set("mode", 0o10000))},
		{"ListFiles", "mode a string", entry(set("mode", "644"))},
		{"ListFiles", "modified_at not a time", entry(set("modified_at", "yesterday"))},
		{"ListFiles", "size a fraction", entry(set("size", 1.5))},
	} {
		t.Run(tc.method+" "+tc.name, func(t *testing.T) {
			_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
				var a map[string]any
				switch tc.method {
				case "WriteFiles":
					a = map[string]any{"files": 1, "bytes": 3}
				case "ReadFile":
					a = readFileAnswer()
				default:
					a = map[string]any{"entries": []any{fileEntryAnswer()}}
				}
				req := bodyValue(t, body)
				delete(req, "session_id")
				seal(t, req, a, "container", "")
				tc.mutate(a)
				return 200, a
			})
			c := newClient(t, url)
			s := &Session{ID: sidA, c: c, chain: record.NewChain("")}
			ctx := context.Background()
			var e1, e2 error
			switch tc.method {
			case "WriteFiles":
				_, e1 = c.WriteFiles(ctx, sidA, []File{{Path: "a", Content: "abc"}})
				_, e2 = s.WriteFiles(ctx, []File{{Path: "a", Content: "abc"}})
			case "ReadFile":
				_, e1 = c.ReadFile(ctx, sidA, "a", 0, 0)
				_, e2 = s.ReadAll(ctx, "a")
			default:
				_, e1 = c.ListFiles(ctx, sidA, "", 0)
				_, e2 = s.ListFiles(ctx, "", 0)
			}
			wantAnswerProtocol(t, tc.method, e1)
			wantAnswerProtocol(t, tc.method, e2)
			if s.Chain().Len() != 0 {
				t.Fatal("a malformed answer joined the chain")
			}
		})
	}
}

// What a FileEntry and a ReadFile answer hold, from every form the daemon
// sends.
func TestFileAnswersRead(t *testing.T) {
	name := []byte("caf\xe9/x") // not UTF-8
	entries := []any{
		map[string]any{"path": "caf\uFFFD/x", "path_base64": base64.StdEncoding.EncodeToString(name), "type": "directory",
			"size": 4096, "mode": 0o4755, "modified_at": "2026-11-30T02:02:03.123456789+01:00"},
		map[string]any{"path": "l", "type": "symlink", "mode": 0o777},
		map[string]any{"path": "p", "type": "fifo", "mode": 0o1600},
		map[string]any{"path": "s", "type": "socket", "mode": 0o2755},
		map[string]any{"path": "dev", "type": "device"},
		map[string]any{"path": "o", "type": "other", "size": 4294967295},
	}
	_, url := newFake(t, func(n int, path string, body []byte) (int, any) {
		req := bodyValue(t, body)
		delete(req, "session_id")
		if strings.HasSuffix(path, "/ListFiles") {
			return 200, seal(t, req, map[string]any{"entries": entries, "truncated": true}, "container", "")
		}
		if strings.HasSuffix(path, "/Describe") {
			return 200, `{"operations":{"files":{"supported":true}},"limits":{"file_read_bytes":4194304,` +
				`"file_list_entries":1000,"session_max_lifetime_s":86400,"min_memory_mb":16}}`
		}
		// The exact bytes in base64, a lossy copy as text; members left out
		// are their defaults.
		return 200, seal(t, req, map[string]any{"path": "b", "content": "\uFFFD", "content_base64": "/w==", "length": 1,
			"size": 9, "offset": 8}, "container", "")
	})
	c := newClient(t, url)
	ctx := context.Background()
	l, err := c.ListFiles(ctx, sidA, "", 2)
	if err != nil || !l.Truncated || len(l.Entries) != 6 {
		t.Fatalf("%v %+v", err, l)
	}
	e := l.Entries[0]
	if !bytes.Equal(e.PathBytes, name) || e.Path != "caf\uFFFD/x" || !e.IsDir() || !e.Mode.IsDir() ||
		e.Mode.Perm() != 0o755 || e.Mode&fs.ModeSetuid == 0 || e.Mode.String() != "durwxr-xr-x" ||
		!e.ModifiedAt.Equal(time.Date(2026, 11, 30, 1, 2, 3, 123456789, time.UTC)) || e.ModifiedAt.Location() != time.UTC {
		t.Fatalf("%+v (%s)", e, e.Mode)
	}
	for i, want := range []fs.FileMode{fs.ModeSymlink | 0o777, fs.ModeNamedPipe | fs.ModeSticky | 0o600,
		fs.ModeSocket | fs.ModeSetgid | 0o755, fs.ModeDevice, fs.ModeIrregular} {
		if got := l.Entries[i+1].Mode; got != want {
			t.Errorf("%s: mode %s, want %s", l.Entries[i+1].Type, got, want)
		}
	}
	if o := l.Entries[5]; o.Size != 4294967295 || !o.ModifiedAt.IsZero() || string(o.PathBytes) != "o" {
		t.Fatalf("%+v", o)
	}
	r, err := c.ReadFile(ctx, sidA, "b", 8, 0)
	if err != nil || !bytes.Equal(r.Content, []byte{0xff}) || r.Length != 1 || r.More || r.Size != 9 {
		t.Fatalf("%v %+v", err, r)
	}
	desc, err := c.Describe(ctx)
	if err != nil || !desc.Operations.Files.Supported || desc.Limits.FileReadBytes != 4<<20 ||
		desc.Limits.FileListEntries != 1000 || desc.Limits.SessionMaxLifetimeS != 86400 || desc.Limits.MinMemoryMb != 16 {
		t.Fatalf("%v %+v", err, desc)
	}
}

// Describe's new members are checked as the others are.
func TestDescribeFilesMalformed(t *testing.T) {
	for _, body := range []string{
		`{"operations":{"files":{"supported":"yes"}}}`,
		`{"operations":{"files":[]}}`,
		`{"limits":{"file_read_bytes":"4194304"}}`,
		`{"limits":{"file_list_entries":-1}}`,
		`{"limits":{"session_max_lifetime_s":1.5}}`,
	} {
		_, url := newFake(t, func(n int, path string, b []byte) (int, any) { return 200, body })
		_, err := newClient(t, url).Describe(context.Background())
		wantAnswerProtocol(t, body, err)
	}
}

// ReadAll pages by offset; Download writes what it reads.
func TestReadAllAndDownload(t *testing.T) {
	d, f, c := newFileDaemon(t)
	ctx := context.Background()
	s := d.session(c)
	d.page = 7
	data := []byte(strings.Repeat("0123456789", 5) + "\xff\xfe tail")
	d.files["big"], d.files["empty"], d.files["seven"] = data, []byte{}, []byte("1234567")
	got, err := s.ReadAll(ctx, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%v %q", err, got)
	}
	pages := (len(data) + 6) / 7
	if f.count() != pages || s.Chain().Len() != pages {
		t.Fatalf("%d calls, %d chained, want %d", f.count(), s.Chain().Len(), pages)
	}
	if f.bodies[0] != `{"path":"big","session_id":"`+sidA+`"}` || f.bodies[1] != `{"offset":7,"path":"big","session_id":"`+sidA+`"}` {
		t.Fatalf("%q", f.bodies[:2])
	}
	for _, name := range []string{"empty", "seven"} {
		if got, err := s.ReadAll(ctx, name); err != nil || !bytes.Equal(got, d.files[name]) || got == nil {
			t.Fatalf("%s: %v %q", name, err, got)
		}
	}
	local := filepath.Join(t.TempDir(), "big")
	if err := s.Download(ctx, "big", local); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(local); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("%v %q", err, b)
	}
	// A missing file: the refusal, and no local file is left.
	missing := filepath.Join(t.TempDir(), "missing")
	if err := s.Download(ctx, "nope", missing); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Download left %s: %v", missing, err)
	}
	if err := s.Download(ctx, "big", filepath.Join(t.TempDir(), "no", "dir")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("into a missing directory: %v", err)
	}
	if err := record.VerifyChain(s.Chain().Entries(), ""); err != nil {
		t.Fatal(err)
	}
}

// A page that does not follow from the ones before is refused.
func TestReadAllInconsistentPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(page int, resp map[string]any)
	}{
		{"no bytes, yet more", func(page int, r map[string]any) {
			if page == 1 {
				r["content"], r["length"], r["more"] = "", 0, true
			}
		}},
		{"the size changes", func(page int, r map[string]any) {
			if page == 1 {
				r["size"] = 30
			}
		}},
		{"more past the size", func(page int, r map[string]any) {
			if page == 2 {
				r["more"] = true
			}
		}},
		{"the end before the size", func(page int, r map[string]any) {
			if page == 0 {
				r["more"] = false
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, c := newFileDaemon(t)
			d.page = 10
			d.files["f"] = []byte(strings.Repeat("x", 25))
			page := 0
			d.tamper = func(method string, req, resp map[string]any) {
				tc.tamper(page, resp)
				page++
			}
			s := d.session(c)
			_, err := s.ReadAll(context.Background(), "f")
			wantAnswerProtocol(t, tc.name, err)
			var e *Error
			if errors.As(err, &e) && !strings.Contains(e.Message, "ReadAll") {
				t.Fatalf("%v", err)
			}
		})
	}
}

// Upload sends as few WriteFiles calls as the bounds allow.
func TestUploadBatches(t *testing.T) {
	write := func(t *testing.T, dir, name string, size int) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'a' + byte(len(name)%26)}, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		sizes []int
		calls []int // files per call
	}{
		{"300 small files", repeat(300, 10), []int{256, 44}},
		{"five of 2 MiB", repeat(5, 2<<20), []int{2, 2, 1}},
		{"256 files", repeat(256, 1), []int{256}},
		{"257 files", repeat(257, 1), []int{256, 1}},
		{"4 MiB exactly", []int{4 << 20}, []int{1}},
		{"4 MiB and a byte", []int{4 << 20, 1}, []int{1, 1}},
		{"empty files", repeat(3, 0), []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tree")
			for i, size := range tc.sizes {
				write(t, dir, fmt.Sprintf("d%d/f%03d", i%3, i), size)
			}
			d, _, c := newFileDaemon(t)
			s := d.session(c)
			n, err := s.Upload(context.Background(), dir, "up")
			if err != nil || n != len(tc.sizes) {
				t.Fatalf("%d %v", n, err)
			}
			var calls []int
			for _, w := range d.writes {
				calls = append(calls, len(w))
			}
			if fmt.Sprint(calls) != fmt.Sprint(tc.calls) || s.Chain().Len() != len(tc.calls) {
				t.Fatalf("calls of %v files, want %v", calls, tc.calls)
			}
			for i, size := range tc.sizes {
				if got := d.files[fmt.Sprintf("up/tree/d%d/f%03d", i%3, i)]; len(got) != size {
					t.Fatalf("file %d: %d bytes, want %d", i, len(got), size)
				}
			}
		})
	}
}

func repeat(n, size int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = size
	}
	return out
}

// Upload: a file, a tree (its regular files only) under its name, as cp -r
// copies it, what is refused.
func TestUpload(t *testing.T) {
	d, f, c := newFileDaemon(t)
	ctx := context.Background()
	s := d.session(c)
	dir := filepath.Join(t.TempDir(), "proj")
	tree := map[string][]byte{
		"a.txt": []byte("text\n"), "bin/b.dat": {0, 1, 0xff}, "bin/deep/c.py": []byte("print(1)\n"),
		"nul.txt": []byte("a\x00b"),
	}
	for name, data := range tree {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bin", filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	// A socket is skipped like the symlinks (a short path: sockets' are).
	sockDir, err := os.MkdirTemp("", "pl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	if ln, err := net.Listen("unix", filepath.Join(sockDir, "s")); err == nil {
		defer ln.Close()
		os.Rename(filepath.Join(sockDir, "s"), filepath.Join(dir, "sock"))
	}
	n, err := s.Upload(ctx, dir, "")
	if err != nil || n != len(tree) || len(d.writes) != 1 {
		t.Fatalf("%d %v %v", n, err, d.writes)
	}
	if got := strings.Join(d.writes[0], " "); got != "proj/a.txt proj/bin/b.dat proj/bin/deep/c.py proj/nul.txt" {
		t.Fatalf("sent %s", got)
	}
	for name, data := range tree {
		if got, err := s.ReadAll(ctx, "proj/"+name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %v %q", name, err, got)
		}
	}
	// Text goes as content, anything else as content_base64.
	if body := f.bodies[0]; !strings.Contains(body, `{"content":"text\n","path":"proj/a.txt"}`) ||
		!strings.Contains(body, `{"content_base64":"AAH/","path":"proj/bin/b.dat"}`) ||
		!strings.Contains(body, `{"content_base64":"YQBi","path":"proj/nul.txt"}`) {
		t.Fatalf("sent %s", body)
	}
	// Into a directory, under its name; a subdirectory by its own name; a
	// path ending in "." or a separator by the directory's name.
	for _, tc := range []struct{ local, remoteDir, want string }{
		{dir, "in", "in/proj/a.txt in/proj/bin/b.dat in/proj/bin/deep/c.py in/proj/nul.txt"},
		{dir, "in/", "in/proj/a.txt in/proj/bin/b.dat in/proj/bin/deep/c.py in/proj/nul.txt"},
		{filepath.Join(dir, "bin"), "", "bin/b.dat bin/deep/c.py"},
		{filepath.Join(dir, "bin", "deep"), "x/y", "x/y/deep/c.py"},
		{dir + string(filepath.Separator) + ".", "", "proj/a.txt proj/bin/b.dat proj/bin/deep/c.py proj/nul.txt"},
		{filepath.Join(dir, "bin") + string(filepath.Separator), "", "bin/b.dat bin/deep/c.py"},
	} {
		calls := len(d.writes)
		n, err := s.Upload(ctx, tc.local, tc.remoteDir)
		if err != nil || len(d.writes) != calls+1 {
			t.Fatalf("%s to %q: %d %v", tc.local, tc.remoteDir, n, err)
		}
		if got := strings.Join(d.writes[calls], " "); got != tc.want || n != len(d.writes[calls]) {
			t.Fatalf("%s to %q: %d sent %s, want %s", tc.local, tc.remoteDir, n, got, tc.want)
		}
	}
	// One file, into a directory, keeping its name; a symlink given is
	// followed.
	if n, err := s.Upload(ctx, filepath.Join(dir, "bin", "b.dat"), "in/here"); err != nil || n != 1 ||
		!bytes.Equal(d.files["in/here/b.dat"], tree["bin/b.dat"]) {
		t.Fatalf("%d %v", n, err)
	}
	if n, err := s.Upload(ctx, filepath.Join(dir, "link"), ""); err != nil || n != 1 || string(d.files["link"]) != "text\n" {
		t.Fatalf("%d %v", n, err)
	}
	if err := record.VerifyChain(s.Chain().Entries(), ""); err != nil {
		t.Fatal(err)
	}

	// Refused before anything is sent: a file past the bound, named.
	sent := f.count()
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(filepath.Join(dir, "zz-big"), make([]byte, MaxWriteBytes+1), 0o644)
	os.WriteFile(big, make([]byte, MaxWriteBytes+1), 0o644)
	for _, p := range []string{dir, big} {
		n, err = s.Upload(ctx, p, "")
		e := wantRefusal(t, err, ErrInvalidRequest)
		if n != 0 || !strings.Contains(e.Message, "zz-big") && !strings.Contains(e.Message, big) ||
			!strings.Contains(e.Message, "MaxWriteBytes") || !strings.Contains(e.Message, "4194304") || e.Dispatched {
			t.Fatalf("%d %+v", n, e)
		}
	}
	if _, err := s.Upload(ctx, filepath.Join(dir, "nothing"), ""); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	// The root has no name to upload it by (and is not walked).
	n, err = s.Upload(ctx, string(filepath.Separator), "")
	if e := wantRefusal(t, err, ErrInvalidRequest); n != 0 || !strings.Contains(e.Message, "no name") || e.Dispatched {
		t.Fatalf("%d %+v", n, e)
	}
	if f.count() != sent {
		t.Fatalf("%d calls sent", f.count()-sent)
	}
	// An empty directory: nothing to send, no call.
	if n, err := s.Upload(ctx, filepath.Join(dir, "empty"), ""); err != nil || n != 0 || f.count() != sent {
		t.Fatalf("%d %v", n, err)
	}
}

// An error of a later call leaves the earlier calls' files written, and
// Upload says how many.
func TestUploadStopsAtAnError(t *testing.T) {
	d, _, c := newFileDaemon(t)
	dir := t.TempDir()
	for i := 0; i < 300; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644)
	}
	d.tamper = func(method string, req, resp map[string]any) {
		if len(d.writes) == 2 {
			resp["files"] = "forged"
		}
	}
	n, err := d.session(c).Upload(context.Background(), dir, "")
	if n != 256 || !errors.Is(err, ErrProtocol) {
		t.Fatalf("%d %v", n, err)
	}
}

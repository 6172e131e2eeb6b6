// SPDX-License-Identifier: Apache-2.0
package plimsoll

// A session's files against the harness's docker session daemon (skipped
// without one, as the other session tests are). Its disk budget is small
// (SANDBOX_SESSION_DISK_MB=8): the files here are too.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"plimsoll/record"
)

func openFilesSession(t *testing.T) (*Client, *Session, context.Context) {
	t.Helper()
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	d, err := c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Operations.Files.Supported || d.Limits.FileReadBytes == 0 || d.Limits.FileListEntries == 0 ||
		d.Limits.SessionMaxLifetimeS == 0 {
		t.Fatalf("the session daemon's Describe: files %+v, limits %+v", d.Operations.Files, d.Limits)
	}
	s, err := c.OpenSession(ctx, &OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return c, s, ctx
}

func names(entries []FileEntry, typ string) string {
	var out []string
	for _, e := range entries {
		if typ == "" || e.Type == typ {
			out = append(out, e.Path)
		}
	}
	return strings.Join(out, " ")
}

func TestSessionFilesLive(t *testing.T) {
	c, s, ctx := openFilesSession(t)
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	text := "héllo, files\n"
	w, err := s.WriteFiles(ctx, []File{{Path: "a.txt", Content: text}, BinaryFile("bin/all.bin", bin),
		{Path: "d/e/f.txt", Content: "deep"}})
	if err != nil || w.Files != 3 || w.Bytes != uint32(len(text)+256+4) || w.Record == nil || w.Record.PreviousDigest != "" {
		t.Fatalf("%v %+v", err, w)
	}

	// Read back: text as it was, binary byte for byte.
	r, err := s.ReadFile(ctx, "a.txt", 0, 0)
	if err != nil || string(r.Content) != text || r.Length != uint32(len(text)) || r.Size != r.Length || r.More ||
		strings.Contains(string(r.Raw), "content_base64") {
		t.Fatalf("%v %+v", err, r)
	}
	r, err = s.ReadFile(ctx, "bin/all.bin", 0, 0)
	if err != nil || !bytes.Equal(r.Content, bin) || r.Size != 256 || r.More || !strings.Contains(string(r.Raw), "content_base64") {
		t.Fatalf("%v %s", err, r.Raw)
	}
	// Pages of 100 bytes.
	var paged []byte
	for offset := uint32(0); ; {
		r, err = s.ReadFile(ctx, "bin/all.bin", offset, 100)
		if err != nil || r.Offset != offset || r.Size != 256 || r.Length > 100 {
			t.Fatalf("at %d: %v %+v", offset, err, r)
		}
		paged = append(paged, r.Content...)
		offset += r.Length
		if !r.More {
			break
		}
	}
	if !bytes.Equal(paged, bin) {
		t.Fatalf("paged %d bytes", len(paged))
	}
	if all, err := s.ReadAll(ctx, "bin/all.bin"); err != nil || !bytes.Equal(all, bin) {
		t.Fatalf("ReadAll: %v %d bytes", err, len(all))
	}

	// Lists: depth 1 is the directory's entries, depth 3 goes down.
	l, err := s.ListFiles(ctx, "", 0)
	if err != nil || names(l.Entries, "") != "a.txt bin d" || l.Truncated {
		t.Fatalf("%v %s", err, l.Raw)
	}
	if e := l.Entries[1]; !e.IsDir() || !e.Mode.IsDir() || e.ModifiedAt.IsZero() || e.Mode.Perm() == 0 {
		t.Fatalf("%+v", e)
	}
	if e := l.Entries[0]; e.Type != FileTypeFile || e.Size != uint32(len(text)) || string(e.PathBytes) != "a.txt" {
		t.Fatalf("%+v", e)
	}
	l, err = s.ListFiles(ctx, "", 3)
	if err != nil || names(l.Entries, "") != "a.txt bin bin/all.bin d d/e d/e/f.txt" {
		t.Fatalf("%v %s", err, l.Raw)
	}
	if l, err = s.ListFiles(ctx, "d", 1); err != nil || names(l.Entries, "") != "d/e" {
		t.Fatalf("%v %+v", err, l)
	}

	// A missing path is not found; what a snippet links is refused.
	_, err = s.ReadFile(ctx, "nope.txt", 0, 0)
	if e := wantRefusal(t, err, ErrNotFound); !strings.HasPrefix(e.Message, "path:") {
		t.Fatalf("%+v", e)
	}
	res, err := s.Run(ctx, py("import os; os.symlink('a.txt', 'ln'); os.symlink('d', 'dl')"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %s", err, show(res))
	}
	_, err = s.ReadFile(ctx, "ln", 0, 0)
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = s.ReadFile(ctx, "dl/e/f.txt", 0, 0)
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = s.WriteFiles(ctx, []File{{Path: "dl/x.txt", Content: "through a link"}})
	wantRefusal(t, err, ErrInvalidRequest)
	_, err = s.ReadFile(ctx, "d", 0, 0)
	wantRefusal(t, err, ErrInvalidRequest)
	if l, err = s.ListFiles(ctx, "", 1); err != nil || names(l.Entries, FileTypeSymlink) != "dl ln" {
		t.Fatalf("%v %s", err, l.Raw)
	}

	// Cells and runs see the files, and file calls see theirs; the chain
	// holds every call.
	cell, err := s.Cell(ctx, &Cell{Language: "python", Code: "print(open('d/e/f.txt').read()); _ = open('out.txt','w').write('from a cell')"}, 0)
	if err != nil || cell.Stdout != "deep\n" {
		t.Fatalf("%v %s", err, show(cell))
	}
	if got, err := s.ReadAll(ctx, "out.txt"); err != nil || string(got) != "from a cell" {
		t.Fatalf("%v %q", err, got)
	}
	ch := s.Chain()
	if err := record.VerifyChain(ch.Entries(), ""); err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.PreviousDigest != ch.Head() || int(info.Calls) != ch.Len() {
		t.Fatalf("%v: %d calls, head %s, chain of %d to %s", err, info.Calls, info.PreviousDigest, ch.Len(), ch.Head())
	}

	// The low-level calls check their record alone.
	if r, err := c.ReadFile(ctx, s.ID, "a.txt", 2, 3); err != nil || string(r.Content) != "\xa9ll" {
		t.Fatalf("%v %+v", err, r)
	}
	if _, err := c.ListFiles(ctx, s.ID, "bin", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteFiles(ctx, s.ID, []File{{Path: "low.txt", Content: "low"}}); err != nil {
		t.Fatal(err)
	}

	// Another caller's id is an unknown one, byte for byte.
	other := sessionClient(t, "PLIMSOLL_TEST_KEY_B")
	unknown := strings.Repeat("0", 64)
	for _, id := range []string{s.ID, unknown} {
		_, e1 := other.ReadFile(ctx, id, "a.txt", 0, 0)
		_, e2 := other.ListFiles(ctx, id, "", 0)
		_, e3 := other.WriteFiles(ctx, id, []File{{Path: "x", Content: "x"}})
		for _, err := range []error{e1, e2, e3} {
			wantRefusal(t, err, ErrNotFound)
		}
	}
	_, err = other.ReadFile(ctx, s.ID, "a.txt", 0, 0)
	theirs := wantRefusal(t, err, ErrNotFound)
	_, err = other.ReadFile(ctx, unknown, "a.txt", 0, 0)
	none := wantRefusal(t, err, ErrNotFound)
	if theirs.Message != none.Message || theirs.HTTPStatus != none.HTTPStatus {
		t.Fatalf("another's %+v, an unknown one %+v", theirs, none)
	}
	// The low-level calls were foreign to the Session: its next call says so.
	_, err = s.ListFiles(ctx, "", 0)
	var ce *record.ChainError
	if !errors.As(err, &ce) || ce.Broken != record.CheckPreviousDigest {
		t.Fatalf("want a previous_digest chain error, got %v", err)
	}
}

func TestSessionUploadDownloadLive(t *testing.T) {
	_, s, ctx := openFilesSession(t)
	dir := filepath.Join(t.TempDir(), "proj") // uploaded under its name, as cp -r copies it
	tree := map[string][]byte{
		"main.py":           []byte("print('hi')\n"),
		"data/rows.csv":     []byte("a,b\n1,2\n"),
		"data/raw/blob.bin": append(bytes.Repeat([]byte{0xff, 0, 0x80}, 30000), 'z'),
		"empty.txt":         {},
	}
	for name, data := range tree {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("main.py", filepath.Join(dir, "link.py")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Upload(ctx, dir, "")
	if err != nil || n != len(tree) || s.Chain().Len() != 1 {
		t.Fatalf("%d %v, chain of %d", n, err, s.Chain().Len())
	}
	if n, err := s.Upload(ctx, filepath.Join(dir, "main.py"), "single"); err != nil || n != 1 {
		t.Fatalf("%d %v", n, err)
	}
	if n, err := s.Upload(ctx, filepath.Join(dir, "data"), "in"); err != nil || n != 2 {
		t.Fatalf("%d %v", n, err)
	}
	l, err := s.ListFiles(ctx, "proj", 16)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name := range tree {
		want = append(want, "proj/"+name)
	}
	sort.Strings(want)
	var got []string
	for _, e := range l.Entries {
		if e.Type == FileTypeFile {
			got = append(got, e.Path)
			if int(e.Size) != len(tree[strings.TrimPrefix(e.Path, "proj/")]) {
				t.Fatalf("%+v", e)
			}
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("listed %q, want %q (the symlink skipped)", got, want)
	}
	for name, data := range tree {
		all, err := s.ReadAll(ctx, "proj/"+name)
		if err != nil || !bytes.Equal(all, data) {
			t.Fatalf("%s: %v, %d bytes of %d", name, err, len(all), len(data))
		}
		local := filepath.Join(t.TempDir(), "copy")
		if err := s.Download(ctx, "proj/"+name, local); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(local); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s downloaded: %v, %d bytes of %d", name, err, len(b), len(data))
		}
	}
	if got, err := s.ReadAll(ctx, "single/main.py"); err != nil || !bytes.Equal(got, tree["main.py"]) {
		t.Fatalf("%v %q", err, got)
	}
	if got, err := s.ReadAll(ctx, "in/data/rows.csv"); err != nil || !bytes.Equal(got, tree["data/rows.csv"]) {
		t.Fatalf("%v %q", err, got)
	}
	if got, err := s.ReadAll(ctx, "in/data/raw/blob.bin"); err != nil || !bytes.Equal(got, tree["data/raw/blob.bin"]) {
		t.Fatalf("%v, %d bytes", err, len(got))
	}
	res, err := s.Run(ctx, &RunRequest{Project: &Project{Steps: []Step{{Argv: []string{"python3", "proj/main.py"}}}}})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout+stepsOut(res), "hi") {
		t.Fatalf("%v %s", err, show(res))
	}
	if err := s.Download(ctx, "proj/missing", filepath.Join(t.TempDir(), "m")); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if err := record.VerifyChain(s.Chain().Entries(), ""); err != nil {
		t.Fatal(err)
	}
}

func stepsOut(r *Result) string {
	out := ""
	for _, st := range r.Steps {
		out += st.Stdout
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// A project's and a snippet's artifacts against the harness's docker
// session daemon (skipped without one), whose bounds are 8 files and
// 64 KiB (SANDBOX_COLLECT_FILES, SANDBOX_COLLECT_BYTES); and SaveArtifacts,
// which never writes outside its directory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// artifactScript writes three files under out/ (walked first: small,
// small, big) and ten under zz/, past the harness's 8 files.
const artifactScript = `import os
os.makedirs('out'); os.makedirs('zz')
open('out/a.bin', 'wb').write(bytes(range(256)) * 4)
open('out/b.txt', 'w', encoding='utf-8').write('h\u00e9llo, artifacts\n')
open('out/z.bin', 'wb').write(bytes((i * 7) % 251 for i in range(70000)))
[open('zz/%02d' % i, 'w').write('x') for i in range(10)]
`

func artifactProject() *Project {
	return &Project{Steps: []Step{{Argv: []string{"python3", "-c", artifactScript}}},
		Collect: []string{"out/*", "zz/*"}}
}

func checkArtifacts(t *testing.T, r *Result) {
	t.Helper()
	bin := bytes.Repeat(func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), 4)
	text := []byte("héllo, artifacts\n")
	big := make([]byte, 70000)
	for i := range big {
		big[i] = byte((i * 7) % 251)
	}
	if r.ExitCode != 0 || len(r.Artifacts) != 8 || !r.ArtifactsTruncated {
		t.Fatalf("answer: %s", show(r))
	}
	var paths []string
	for _, a := range r.Artifacts {
		paths = append(paths, a.Path)
	}
	if want := "[out/a.bin out/b.txt out/z.bin zz/00 zz/01 zz/02 zz/03 zz/04]"; fmt.Sprint(paths) != want {
		t.Fatalf("paths %v, want %s", paths, want)
	}
	a, b, z := r.Artifacts[0], r.Artifacts[1], r.Artifacts[2]
	if !bytes.Equal(a.Content, bin) || a.Size != 1024 || a.Truncated {
		t.Errorf("a.bin: %d bytes, size %d, truncated %v", len(a.Content), a.Size, a.Truncated)
	}
	if !bytes.Equal(b.Content, text) || b.Size != uint32(len(text)) || b.Truncated {
		t.Errorf("b.txt: %q, size %d, truncated %v", b.Content, b.Size, b.Truncated)
	}
	// the 64 KiB budget runs out in z.bin: its first bytes, then none
	if n := 65536 - len(bin) - len(text); len(z.Content) != n || !bytes.Equal(z.Content, big[:n]) || z.Size != 70000 || !z.Truncated {
		t.Errorf("z.bin: %d bytes, size %d, truncated %v", len(z.Content), z.Size, z.Truncated)
	}
	for _, x := range r.Artifacts[3:] {
		if x.Size != 1 || len(x.Content) != 0 || !x.Truncated {
			t.Errorf("%s: size %d, %d bytes, truncated %v", x.Path, x.Size, len(x.Content), x.Truncated)
		}
	}
	dir := filepath.Join(t.TempDir(), "got")
	saved, err := r.SaveArtifacts(dir)
	if err != nil || len(saved) != 8 || saved[0] != filepath.Join(dir, "out", "a.bin") {
		t.Fatalf("SaveArtifacts: %v %v", saved, err)
	}
	if got, _ := os.ReadFile(saved[0]); !bytes.Equal(got, bin) {
		t.Errorf("saved a.bin: %d bytes", len(got))
	}
	if got, _ := os.ReadFile(saved[1]); !bytes.Equal(got, text) {
		t.Errorf("saved b.txt: %q", got)
	}
}

func TestArtifactsLive(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	d, err := c.Describe(ctx)
	if err != nil || !d.Operations.Artifacts.Project ||
		d.Limits.CollectFiles != 8 || d.Limits.CollectBytes != 65536 {
		t.Fatalf("Describe: %+v %+v %v", d.Operations.Artifacts, d.Limits, err)
	}
	r, err := c.Run(ctx, &RunRequest{Project: artifactProject()})
	if err != nil {
		t.Fatal(err)
	}
	checkArtifacts(t, r)

	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	r, err = s.Run(ctx, &RunRequest{Project: artifactProject()})
	if err != nil {
		t.Fatal(err)
	}
	checkArtifacts(t, r)
	r, err = s.Run(ctx, &RunRequest{Project: &Project{Steps: []Step{{Argv: []string{"true"}}}}})
	if err != nil || r.Artifacts != nil || r.ArtifactsTruncated {
		t.Fatalf("no globs: %s %v", show(r), err)
	}
}

// TestSnippetArtifactsLive: a python snippet's Collect, one-shot and in a
// session, brings back the file it wrote, byte for byte.
func TestSnippetArtifactsLive(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	d, err := c.Describe(ctx)
	if err != nil || !d.Operations.Artifacts.Snippet {
		t.Fatalf("Describe: %+v %v", d.Operations.Artifacts, err)
	}
	want := make([]byte, 256)
	for i := range want {
		want[i] = byte(i)
	}
	req := &RunRequest{Snippet: &Snippet{Language: "python", Code: "import os\n" +
		"os.makedirs('out', exist_ok=True)\n" +
		"open('out/s.bin', 'wb').write(bytes(range(256)))\nprint('done')\n",
		Collect: []string{"out/*"}}}
	check := func(r *Result) {
		t.Helper()
		if r.ExitCode != 0 || r.Stdout != "done\n" || len(r.Artifacts) != 1 || r.ArtifactsTruncated {
			t.Fatalf("answer: %s", show(r))
		}
		a := r.Artifacts[0]
		if a.Path != "out/s.bin" || a.Size != 256 || !bytes.Equal(a.Content, want) || a.Truncated {
			t.Errorf("artifact %s: size %d, %x, truncated %v", a.Path, a.Size, a.Content, a.Truncated)
		}
	}
	r, err := c.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	check(r)
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if r, err = s.Run(ctx, req); err != nil {
		t.Fatal(err)
	}
	check(r)
}

func resultOf(t *testing.T, answer string) *Result {
	t.Helper()
	var r Result
	if err := decodeInto("Run", []byte(answer), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestArtifactsExactBytes(t *testing.T) {
	// d/caf\xe9.bin, and content ff 00 fe
	r := resultOf(t, `{"artifacts":[{"path":"d/caf\ufffd.bin","path_base64":"ZC9jYWbpLmJpbg==","size":3,"content":"\ufffd","content_base64":"/wD+"},{"path":"t.txt","size":2,"content":"hi"}],"artifacts_truncated":false}`)
	a := r.Artifacts[0]
	if string(a.PathBytes) != "d/caf\xe9.bin" || !bytes.Equal(a.Content, []byte{0xff, 0, 0xfe}) {
		t.Fatalf("%q %x", a.PathBytes, a.Content)
	}
	dir := t.TempDir()
	if _, err := r.SaveArtifacts(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "d/caf\xe9.bin")); !bytes.Equal(got, []byte{0xff, 0, 0xfe}) {
		t.Errorf("saved %x", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "t.txt")); string(got) != "hi" {
		t.Errorf("saved %q", got)
	}
	var bad Result
	if err := decodeInto("Run", []byte(`{"artifacts":[{"path":"a","content_base64":"%%"}]}`), &bad); !errors.Is(err, ErrProtocol) {
		t.Errorf("bad base64: %v", err)
	}
}

func TestSaveArtifactsRefusesHostilePaths(t *testing.T) {
	top := t.TempDir()
	target, outside := filepath.Join(top, "target"), filepath.Join(top, "outside")
	for _, d := range []string{target, outside} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"../x", "a/../../x", "/etc/x", "", "a//b", "./x", "a/."} {
		r := &Result{Artifacts: []Artifact{{PathBytes: []byte("ok.txt"), Content: []byte("ok")},
			{Path: p, PathBytes: []byte(p), Content: []byte("x")}}}
		if _, err := r.SaveArtifacts(target); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%q: %v", p, err)
		}
		if ls, _ := os.ReadDir(target); len(ls) != 0 {
			t.Errorf("%q: wrote %v", p, ls)
		}
	}
	if err := os.Symlink(outside, filepath.Join(target, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), filepath.Join(target, "f")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"link/x", "f"} {
		r := &Result{Artifacts: []Artifact{{Path: p, PathBytes: []byte(p), Content: []byte("x")}}}
		if _, err := r.SaveArtifacts(target); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%q: %v", p, err)
		}
	}
	ls, _ := os.ReadDir(outside)
	top2, _ := os.ReadDir(top)
	var names []string
	for _, e := range top2 {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if len(ls) != 0 || fmt.Sprint(names) != "[outside target]" {
		t.Errorf("outside holds %v; top holds %v", ls, names)
	}
}

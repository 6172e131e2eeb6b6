// SPDX-License-Identifier: Apache-2.0
package plimsoll

// RunStream against the harness's real wasm daemon.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const streamLines = "for (let i = 0; i < 5; i++) console.log('line ' + i);\nconsole.error('to stderr');\n"

func TestDaemonStreamsASnippet(t *testing.T) {
	c := client(t, "PLIMSOLL_TEST_URL")
	d, err := c.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []OutputChunk
	req := js(streamLines)
	req.MinimumIsolation = TierProcess
	res, err := c.RunStream(ctxT(t), req, func(ch OutputChunk) error {
		chunks = append(chunks, ch)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "line 0\nline 1\nline 2\nline 3\nline 4\n"
	if res.ExitCode != 0 || res.Stdout != want || res.Stderr != "to stderr\n" || res.Record == nil ||
		res.Record.Provider != "wasm" || res.Isolation != TierProcess {
		t.Fatalf("result %s", show(res))
	}
	if !d.Operations.Snippet.Streams { // Describe says the kind sends only the result
		if len(chunks) != 0 {
			t.Fatalf("%d chunks from a kind that does not stream", len(chunks))
		}
		return
	}
	var out, errs []byte
	for _, ch := range chunks {
		out, errs = append(out, ch.Stdout...), append(errs, ch.Stderr...)
		if ch.Step != 0 {
			t.Fatalf("a snippet's chunk of step %d", ch.Step)
		}
	}
	if len(chunks) == 0 || !bytes.Equal(out, res.StdoutBytes()) || !bytes.Equal(errs, res.StderrBytes()) {
		t.Fatalf("%d chunks: %q %q", len(chunks), out, errs)
	}
}

func TestDaemonStreamsAModule(t *testing.T) {
	wasm, err := os.ReadFile(need(t, "PLIMSOLL_TEST_WASM_MODULE"))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	res, err := client(t, "PLIMSOLL_TEST_URL").RunStream(ctxT(t), &RunRequest{Module: WasmModule(wasm)}, func(ch OutputChunk) error {
		out = append(out, ch.Stdout...)
		return nil
	})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.StdoutBytes()), "hello, world") {
		t.Fatalf("%v %s", err, show(res))
	}
	if len(out) > 0 && !bytes.Equal(out, res.StdoutBytes()) {
		t.Fatalf("streamed %q", out)
	}
}

func TestDaemonStreamRefusalIsRunsRefusal(t *testing.T) {
	c := client(t, "PLIMSOLL_TEST_URL")
	req := js("console.log(1)")
	req.MinimumIsolation = TierVM
	_, unary := c.Run(ctxT(t), req)
	u := wantRefusal(t, unary, ErrInsufficientIsolation)
	n := 0
	_, err := c.RunStream(ctxT(t), req, func(OutputChunk) error { n++; return nil })
	e := wantRefusal(t, err, ErrInsufficientIsolation)
	if e.Reason != u.Reason || e.Code != u.Code || e.Dispatched || e.Metadata["isolation"] != TierProcess ||
		e.Metadata["dispatched"] != "false" || n != 0 {
		t.Fatalf("stream %+v, unary %+v, %d chunks", e, u, n)
	}
	if errors.Is(err, ErrInfrastructure) {
		t.Fatal("a refusal matches ErrInfrastructure")
	}
}

func TestDaemonStreamBadKey(t *testing.T) {
	c, err := NewClient(need(t, "PLIMSOLL_TEST_URL"), "plk_not-a-key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RunStream(ctxT(t), js("console.log(1)"), nil)
	if e := wantRefusal(t, err, ErrUnauthenticated); e.Dispatched || e.Reason != "UNAUTHENTICATED" {
		t.Fatalf("refusal %+v", e)
	}
}

func TestDaemonStreamDisabled(t *testing.T) {
	_, err := client(t, "PLIMSOLL_TEST_DISABLED_URL").RunStream(ctxT(t), js("console.log(1)"), nil)
	wantRefusal(t, err, ErrDisabled)
}

// The README's streaming example is cmd/stream/main.go, and it runs.
func TestReadmeStreamExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/stream/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/stream/main.go as it is")
	}
	cmd := exec.Command("go", "run", "./cmd/stream")
	cmd.Env = readmeEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`^line 0\nline 1\nline 2\nexit 0, record [0-9a-f]{64}\n$`).Match(out) {
		t.Fatalf("go run ./cmd/stream: %v\n%s", err, out)
	}
}

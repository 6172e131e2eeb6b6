// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeEnv is what the README's reader has: PLIMSOLL_URL and a key file
// ending in a newline, as keygen writes it; no PLIMSOLL_KEY.
func readmeEnv(t *testing.T) []string {
	return readmeEnvAt(t, need(t, "PLIMSOLL_TEST_URL"))
}

// readmeEnvAt is readmeEnv with PLIMSOLL_URL url.
func readmeEnvAt(t *testing.T, url string) []string {
	key := need(t, "PLIMSOLL_TEST_KEY")
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// the last of a duplicate variable wins
	return append(os.Environ(), "PLIMSOLL_URL="+url, "PLIMSOLL_KEY=", "PLIMSOLL_KEY_FILE="+path)
}

// The README's example is cmd/example/main.go, and it runs.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/example/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/example/main.go as it is")
	}
	cmd := exec.Command("go", "run", "./cmd/example")
	cmd.Env = readmeEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "exit 0 at tier process: 42\n" {
		t.Fatalf("go run ./cmd/example: %v\n%s", err, out)
	}
}

// The README's session-management example is cmd/sessions/main.go, and it
// runs against the session daemon (skipped without one, as the session
// tests are).
func TestReadmeSessionsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/sessions/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/sessions/main.go as it is")
	}
	url := os.Getenv("PLIMSOLL_TEST_SESSION_URL")
	if url == "" {
		t.Skip("PLIMSOLL_TEST_SESSION_URL is unset: no session daemon; skipping the run of cmd/sessions")
	}
	cmd := exec.Command("go", "run", "./cmd/sessions")
	cmd.Env = readmeEnvAt(t, url)
	out, err := cmd.CombinedOutput()
	want := "listed: ready, 1 call(s)\n42\nends in 2h0m0s\n2 calls; the last record is the chain's head: true\npast the maximum: true\n"
	if err != nil || string(out) != want {
		t.Fatalf("go run ./cmd/sessions: %v\n%s", err, out)
	}
}

// The README's session-files example is cmd/files/main.go, and it runs
// against the session daemon (skipped without one).
func TestReadmeFilesExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/files/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/files/main.go as it is")
	}
	url := os.Getenv("PLIMSOLL_TEST_SESSION_URL")
	if url == "" {
		t.Skip("PLIMSOLL_TEST_SESSION_URL is unset: no session daemon; skipping the run of cmd/files")
	}
	cmd := exec.Command("go", "run", "./cmd/files")
	cmd.Env = readmeEnvAt(t, url)
	out, err := cmd.CombinedOutput()
	want := "wrote 2 files, 10 bytes\ndirectory in -rwxr-xr-x\nfile in/data.bin -rw-r--r--\n" +
		"file in/greeting.txt -rw-r--r--\nfile out.txt -rw-r--r--\n[1 2] of 4 bytes; more: true\nHELLO\n" +
		"missing: true\n1 uploaded: uploaded\ndownloaded \"HELLO\\n\"\n8 records\n"
	if err != nil || string(out) != want {
		t.Fatalf("go run ./cmd/files: %v\n%s", err, out)
	}
}

// The README's artifacts example is cmd/artifacts/main.go, and it runs
// against the docker daemon (skipped without one).
func TestReadmeArtifactsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/artifacts/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/artifacts/main.go as it is")
	}
	url := os.Getenv("PLIMSOLL_TEST_SESSION_URL")
	if url == "" {
		t.Skip("PLIMSOLL_TEST_SESSION_URL is unset: no docker daemon; skipping the run of cmd/artifacts")
	}
	cmd := exec.Command("go", "run", "./cmd/artifacts")
	cmd.Env = readmeEnvAt(t, url)
	out, err := cmd.CombinedOutput()
	want := "dist/raw.bin 2 \"\\xff\\x00\" truncated: false\ndist/report.csv 9 \"total,42\\n\" truncated: false\n" +
		"more than came: false\nsaved /dist/raw.bin\nsaved /dist/report.csv\n"
	if err != nil || string(out) != want {
		t.Fatalf("go run ./cmd/artifacts: %v\n%s", err, out)
	}
}

// The README's display example is cmd/display/main.go, and it runs
// against the docker daemon (skipped without one).
func TestReadmeDisplayExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("cmd/display/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show cmd/display/main.go as it is")
	}
	url := os.Getenv("PLIMSOLL_TEST_SESSION_URL")
	if url == "" {
		t.Skip("PLIMSOLL_TEST_SESSION_URL is unset: no docker daemon; skipping the run of cmd/display")
	}
	cmd := exec.Command("go", "run", "./cmd/display")
	cmd.Env = readmeEnvAt(t, url)
	out, err := cmd.CombinedOutput()
	want := "shown: display [image/png]\nshown: result [text/html text/plain]\n" +
		"\"\\x89PNG\\r\\n\" <b>42</b> dropped: 0\ncgroup true true\n"
	if err != nil || string(out) != want {
		t.Fatalf("go run ./cmd/display: %v\n%s", err, out)
	}
}

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
	url, key := need(t, "PLIMSOLL_TEST_URL"), need(t, "PLIMSOLL_TEST_KEY")
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

// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

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
	cmd.Env = append(os.Environ(), "PLIMSOLL_URL="+need(t, "PLIMSOLL_TEST_URL"),
		"PLIMSOLL_KEY="+need(t, "PLIMSOLL_TEST_KEY"))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "exit 0 at tier process: 42\n" {
		t.Fatalf("go run ./cmd/example: %v\n%s", err, out)
	}
}

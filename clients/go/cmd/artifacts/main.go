// Command artifacts runs a project on the daemon at $PLIMSOLL_URL that
// collects what its step built, and saves the files under a local
// directory.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"plimsoll"
)

func main() {
	ctx := context.Background()
	c, err := plimsoll.NewClient("", "") // PLIMSOLL_URL, and PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
	if err != nil {
		log.Fatal(err)
	}
	r, err := c.Run(ctx, &plimsoll.RunRequest{Project: &plimsoll.Project{
		Steps: []plimsoll.Step{{Argv: []string{"sh", "-c",
			`mkdir dist && echo total,42 > dist/report.csv && printf '\377\0' > dist/raw.bin`}}},
		Collect: []string{"dist/*"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range r.Artifacts { // in the walk's order; Content the exact bytes
		fmt.Printf("%s %d %q truncated: %v\n", a.Path, a.Size, a.Content, a.Truncated)
	}
	fmt.Println("more than came:", r.ArtifactsTruncated)

	dir, err := os.MkdirTemp("", "artifacts-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	saved, err := r.SaveArtifacts(dir) // never outside dir
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range saved {
		fmt.Println("saved", strings.TrimPrefix(p, dir))
	}
}

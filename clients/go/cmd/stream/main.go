// Command stream runs a snippet on the daemon at $PLIMSOLL_URL and prints
// its output as it comes.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"plimsoll"
)

func main() {
	c, err := plimsoll.NewClient("", "") // PLIMSOLL_URL, and PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
	if err != nil {
		log.Fatal(err)
	}
	req := &plimsoll.RunRequest{
		MinimumIsolation: "process",
		Snippet: &plimsoll.Snippet{Language: "javascript",
			Code: "for (let i = 0; i < 3; i++) console.log('line ' + i)"},
	}
	res, err := c.RunStream(context.Background(), req, func(chunk plimsoll.OutputChunk) error {
		_, err := os.Stdout.Write(chunk.Stdout) // as the guest writes it
		return err                              // an error ends the call
	})
	if err != nil { // as Run's: a refusal, infrastructure, a tier mismatch, a broken record or stream
		log.Fatal(err)
	}
	fmt.Printf("exit %d, record %s\n", res.ExitCode, res.Record.Digest)
}

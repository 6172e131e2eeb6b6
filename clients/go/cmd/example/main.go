// Command example runs one snippet on the daemon at $PLIMSOLL_URL.
package main

import (
	"context"
	"fmt"
	"log"

	"plimsoll"
)

func main() {
	c, err := plimsoll.NewClient("", "") // PLIMSOLL_URL, and PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Run(context.Background(), &plimsoll.RunRequest{
		MinimumIsolation: "process", // refused unless the daemon's tier is at least this
		Snippet:          &plimsoll.Snippet{Language: "javascript", Code: "console.log(6 * 7)"},
	})
	if err != nil { // a refusal, infrastructure, a tier mismatch or a broken record
		log.Fatal(err)
	}
	fmt.Printf("exit %d at tier %s: %s", res.ExitCode, res.Isolation, res.Stdout)
}

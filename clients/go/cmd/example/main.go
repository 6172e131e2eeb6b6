// Command example runs one snippet on the daemon at $PLIMSOLL_URL.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"plimsoll"
)

func main() {
	c, err := plimsoll.NewClient(os.Getenv("PLIMSOLL_URL"), os.Getenv("PLIMSOLL_KEY"))
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

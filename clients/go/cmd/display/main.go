// Command display runs a cell in a session on the daemon at $PLIMSOLL_URL
// that shows an image and an HTML value, and prints them as they come,
// their bytes, and what the cell cost.
package main

import (
	"context"
	"fmt"
	"log"

	"plimsoll"
)

func main() {
	ctx := context.Background()
	c, err := plimsoll.NewClient("", "") // PLIMSOLL_URL, and PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.OpenSession(ctx, &plimsoll.OpenSessionRequest{Languages: []string{"python"}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	code := "display({'image/png': b'\\x89PNG\\r\\n'}, raw=True)\n" +
		"class Total:\n" +
		"    def _repr_html_(self): return '<b>42</b>'\n" +
		"Total()"
	r, err := s.CellStream(ctx, &plimsoll.Cell{Language: "python", Code: code}, 0,
		func(ch plimsoll.OutputChunk) error {
			if ch.Display != nil { // a display output, in its place among the output
				fmt.Println("shown:", ch.Display.Kind, ch.Display.Types())
			}
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	png, err := r.Outputs[0].Bytes("image/png") // base64 decoded; a text type as it is
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %s dropped: %d\n", png, r.Outputs[1].Data["text/html"], r.OutputsDropped)
	if r.Usage == nil {
		fmt.Println("not measured:", r.UsageAbsent)
	} else {
		fmt.Println(r.Usage.Source, r.Usage.WallMs > 0, r.Usage.MemoryPeakKiB > 0)
	}
}

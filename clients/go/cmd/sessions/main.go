// Command sessions finds a session again by its id, as a restarted process
// would, and manages its lifetime, on the daemon at $PLIMSOLL_URL.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

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
	if _, err := s.Cell(ctx, &plimsoll.Cell{Language: "python", Code: "x = 41"}, 0); err != nil {
		log.Fatal(err)
	}

	// ListSessions: your own sessions, oldest first (ended ones for a while).
	list, err := c.ListSessions(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range list {
		if info.SessionID == s.ID {
			fmt.Printf("listed: %s, %d call(s)\n", info.State, info.Calls)
		}
	}

	// ConnectSession: a Session for the id, its chain going on from the
	// session's last record (an ended session is a *SessionEndedError).
	r, err := c.ConnectSession(ctx, s.ID, "") // "": no floor
	if err != nil {
		log.Fatal(err)
	}
	res, err := r.Cell(ctx, &plimsoll.Cell{Language: "python", Code: "x + 1"}, 0)
	if err != nil { // its record must name the last one: the chain is checked
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)

	// ExtendSession (Session.Extend): the session now ends in two hours.
	info, err := r.Extend(ctx, 2*3600)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ends in", time.Until(info.LifetimeDeadline).Round(time.Minute))

	// GetSession (Session.Info): the session as it is now.
	info, err = c.GetSession(ctx, s.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Calls, "calls; the last record is the chain's head:", info.PreviousDigest == r.Chain().Head())

	// Past the operator's maximum from the open: refused.
	_, err = r.Extend(ctx, info.MaxLifetimeS+1)
	fmt.Println("past the maximum:", errors.Is(err, plimsoll.ErrInvalidRequest))
}

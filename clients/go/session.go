// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"context"
	"sync"

	"plimsoll/record"
)

// Session is an open session: calls share a sandbox whose files and kept
// interpreters persist. It checks every answer's record against its chain
// (record.Chain) and advances the chain only when all checks hold; after a
// chain error or a tier mismatch, open a new session. Calls on one Session
// are serialized.
type Session struct {
	// ID is the session's id.
	ID string

	c     *Client
	mu    sync.Mutex
	chain *record.Chain
	floor string
}

// Chain is the session's chain of accepted records. A harness signs its
// Head (which covers every earlier record) with its own key.
func (s *Session) Chain() *record.Chain { return s.chain }

// Run runs a snippet or a project in the session.
func (s *Session) Run(ctx context.Context, req *RunRequest) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req != nil && req.MinimumIsolation == "" && s.floor != "" {
		withFloor := *req
		withFloor.MinimumIsolation = s.floor
		req = &withFloor
	}
	body, sent, floor, err := sessionRun(&RunInSessionRequest{SessionID: s.ID, Run: req})
	if err != nil {
		return nil, err
	}
	res, resp, err := s.c.run(ctx, "RunInSession", body, floor)
	if err != nil {
		return nil, err
	}
	if _, err := s.chain.Append(sent, resp); err != nil {
		return nil, err
	}
	return res, nil
}

// Cell runs a cell in the session's kept interpreter of its language;
// timeoutMs 0 is the daemon's default (and is not sent).
func (s *Session) Cell(ctx context.Context, cell *Cell, timeoutMs uint32) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, sent, err := sessionCell(&RunCellRequest{SessionID: s.ID, Cell: cell, TimeoutMs: timeoutMs})
	if err != nil {
		return nil, err
	}
	res, resp, err := s.c.run(ctx, "RunCell", body, s.floor)
	if err != nil {
		return nil, err
	}
	if _, err := s.chain.Append(sent, resp); err != nil {
		return nil, err
	}
	return res, nil
}

// Close ends the session; later calls get a *SessionEndedError.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.CloseSession(ctx, s.ID)
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// RunStream and RunCellStream: Connect server streaming with JSON messages
// (application/connect+json). The request is one envelope (a flags byte, a
// 4-byte big-endian length, the JSON request); the answer's body is a
// sequence of envelopes: output chunks, then the result, then the
// end-of-stream message (flags 0x02), {} or {"error": …}.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"

	"plimsoll/record"
)

// DefaultMaxMessageBytes caps one message of a stream unless
// WithMaxMessageBytes says otherwise; a longer one is refused from its
// header, before its bytes are read. The same in every official client.
const DefaultMaxMessageBytes = 16 << 20

const (
	streamMediaType  = "application/connect+json"
	flagCompressed   = 0x01
	flagEndStream    = 0x02
	envelopeHeadSize = 5
)

// WithMaxMessageBytes caps one message of a stream (RunStream,
// RunCellStream; default DefaultMaxMessageBytes, 16 MiB). n < 1 keeps the
// default. WithMaxAnswerBytes caps the whole stream.
func WithMaxMessageBytes(n int64) Option {
	return func(c *Client) {
		if n >= 1 {
			c.maxMessage = n
		}
	}
}

// OutputChunk is what the guest wrote since the previous chunk: the exact
// bytes of each stream (either may be empty; within a chunk nothing orders
// one against the other) and, for a project, its Step (from 1; 0 for a
// snippet, a module or a cell). Joined in order, a step's chunks are its
// result's output byte for byte (the client checks this). A chunk may end
// inside a multi-byte character.
//
// A cell's display output comes as a chunk of its own, in the order the
// cell produced it among its output: Display is then the output (Stdout
// and Stderr empty); it is nil in every other chunk. In order, they are
// the result's Outputs (the client checks this too).
type OutputChunk struct {
	Stdout  []byte
	Stderr  []byte
	Step    uint32
	Display *DisplayOutput
}

// OnOutput receives each chunk of a stream as it comes; an error it
// returns ends the call (the connection is closed) and is returned as it
// is. It runs on the calling goroutine; its time counts against the call's
// timeout, which a slow OnOutput cannot escape: the call fails with the
// deadline error once it returns.
type OnOutput func(OutputChunk) error

var (
	outputChunkShape = shape{
		"stdout": fString, "stderr": fString, "step": fUint32,
		"display": {kind: kMessage, sub: displayOutputShape},
	}
	runStreamResponseShape = shape{
		"output": {kind: kMessage, sub: outputChunkShape},
		"result": {kind: kMessage, sub: runResponseShape},
	}
	endStreamShape = shape{
		"error":    {kind: kMessage, sub: connectErrorShape},
		"metadata": {kind: kAny},
	}
)

func mediaTypeIsStream(v string) bool {
	parts := strings.SplitN(v, ";", 2)
	if !strings.EqualFold(strings.TrimSpace(parts[0]), streamMediaType) {
		return false
	}
	rest := ""
	if len(parts) == 2 {
		rest = ";" + parts[1]
	}
	return mediaTypeIsJSON("application/json" + rest)
}

// envelope wraps a message.
func envelope(flags byte, payload []byte) []byte {
	b := make([]byte, envelopeHeadSize, envelopeHeadSize+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// protoBytes decodes proto3 JSON bytes: standard or URL-safe base64,
// padded or not.
func protoBytes(s, where string) ([]byte, error) {
	s = trimPad(strings.NewReplacer("-", "+", "_", "/").Replace(s))
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("%s is not base64", where)
	}
	return b, nil
}

type joined struct {
	n int64
	h hash.Hash
}

// streamReader reads one stream's envelopes.
type streamReader struct {
	method string
	ctx    context.Context
	body   io.Reader
	read   int64 // bytes of the body read
	cap    int64 // c.maxAnswer: the whole body
	max    int64 // c.maxMessage: one message

	chunks int
	result map[string]any
	raw    []byte
	err    error // the end-of-stream error
	ended  bool
	joined map[[2]uint32]*joined
	// displays are the display outputs given, joined as displayLines.
	displays  joined
	ndisplays int
}

// displayLine is one display output as the stream's displays are joined:
// its canonical form and a newline (which a canonical form never holds).
func displayLine(d any) ([]byte, error) {
	c, err := record.Canonical(d)
	if err != nil {
		return nil, err
	}
	return append([]byte(c), '\n'), nil
}

func (s *streamReader) protocol(format string, args ...any) error {
	return protocolError(s.method, http.StatusOK, fmt.Errorf("the stream "+format, args...))
}

// readFull reads len(b) bytes; n is how many came when the body ended.
func (s *streamReader) readFull(b []byte) (int, error) {
	n, err := io.ReadFull(s.body, b)
	s.read += int64(n)
	if s.read > s.cap {
		return n, protocolError(s.method, http.StatusOK, fmt.Errorf("it is longer than the client's cap (%d bytes)", s.cap))
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, nil
	}
	if s.ctx.Err() != nil {
		return n, deadlineError(s.ctx, s.method, "reading the stream")
	}
	e := transportError(err, "%s: reading the stream", s.method)
	e.HTTPStatus = http.StatusOK
	return n, e
}

// next reads and handles one envelope; false at the end of the body.
func (s *streamReader) next(onOutput OnOutput) (bool, error) {
	var head [envelopeHeadSize]byte
	n, err := s.readFull(head[:])
	if err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	if s.ended {
		return false, s.protocol("goes on after its end-of-stream message")
	}
	if n < envelopeHeadSize {
		return false, s.protocol("ends inside an envelope (%d bytes of it)", n)
	}
	flags, size := head[0], binary.BigEndian.Uint32(head[1:])
	if int64(size) > s.max {
		return false, s.protocol("announces a message of %d bytes, past the client's cap (%d)", size, s.max)
	}
	if flags&^flagEndStream != 0 {
		why := "not a message nor the end of the stream"
		if flags == flagCompressed {
			why = "compressed, which was not asked for"
		}
		return false, s.protocol("has an envelope with flags 0x%02x (%s)", flags, why)
	}
	payload := make([]byte, size)
	if n, err = s.readFull(payload); err != nil {
		return false, err
	}
	if n < int(size) {
		return false, s.protocol("ends inside an envelope (%d bytes of it)", envelopeHeadSize+n)
	}
	if flags&flagEndStream != 0 {
		return true, s.end(payload)
	}
	return true, s.message(payload, onOutput)
}

func (s *streamReader) parse(payload []byte, sh shape, what string) (map[string]any, error) {
	v, err := parseAnswer(s.ctx, payload)
	if err == nil {
		err = checkShape(v, sh, what)
	}
	if s.ctx.Err() != nil {
		return nil, deadlineError(s.ctx, s.method, "still decoding the stream")
	}
	if err != nil {
		return nil, s.protocol("has a %s that is not one: %v", what, err)
	}
	return v.(map[string]any), nil
}

func (s *streamReader) message(payload []byte, onOutput OnOutput) error {
	if s.result != nil {
		return s.protocol("has a message after its result")
	}
	m, err := s.parse(payload, runStreamResponseShape, "RunStreamResponse")
	if err != nil {
		return err
	}
	out, _ := m["output"].(map[string]any)
	res, _ := m["result"].(map[string]any)
	if out != nil && res != nil {
		return s.protocol("has a message with both an output and a result")
	}
	if res != nil {
		if err := checkRun(res, "RunStreamResponse.result"); err != nil {
			return s.protocol("has a result that is not one: %v", err)
		}
		var w struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(payload, &w); err != nil {
			return s.protocol("has a result that is not one: %v", err)
		}
		s.result, s.raw = res, w.Result
		return nil
	}
	if out == nil {
		return nil // a kind of message this client does not know: skipped
	}
	if d, ok := out["display"].(map[string]any); ok {
		return s.display(out, d, payload, onOutput)
	}
	var chunk OutputChunk
	str := func(k string) string { v, _ := out[k].(string); return v }
	if chunk.Stdout, err = protoBytes(str("stdout"), "output.stdout"); err == nil {
		chunk.Stderr, err = protoBytes(str("stderr"), "output.stderr")
	}
	if err != nil {
		return s.protocol("has an output chunk that is not one: %v", err)
	}
	if n, ok := out["step"].(json.Number); ok {
		x, _ := n.Int64()
		chunk.Step = uint32(x)
	}
	for fd, data := range [2][]byte{chunk.Stdout, chunk.Stderr} {
		key := [2]uint32{chunk.Step, uint32(fd)}
		j := s.joined[key]
		if j == nil {
			j = &joined{h: sha256.New()}
			s.joined[key] = j
		}
		j.n += int64(len(data))
		j.h.Write(data)
		if j.n > s.max {
			return s.protocol("has more output than a result could hold")
		}
	}
	s.chunks++
	if onOutput != nil {
		return &callerError{onOutput(chunk)}
	}
	return nil
}

// display handles an output chunk that is a cell's display output: nothing
// else in it, a display the result could hold.
func (s *streamReader) display(out, d map[string]any, payload []byte, onOutput OnOutput) error {
	if o, _ := out["stdout"].(string); o != "" {
		return s.protocol("has an output chunk with both a display output and output bytes")
	}
	if e, _ := out["stderr"].(string); e != "" {
		return s.protocol("has an output chunk with both a display output and output bytes")
	}
	if err := checkDisplay(d, "output.display"); err != nil {
		return s.protocol("has an output chunk that is not one: %v", err)
	}
	line, err := displayLine(d)
	if err != nil {
		return s.protocol("has an output chunk that is not one: %v", err)
	}
	if s.displays.h == nil {
		s.displays.h = sha256.New()
	}
	s.displays.n += int64(len(line))
	s.displays.h.Write(line)
	s.ndisplays++
	if s.displays.n > s.max {
		return s.protocol("has more display outputs than a result could hold")
	}
	var w struct {
		Output struct {
			Display DisplayOutput `json:"display"`
		} `json:"output"`
	}
	if err := json.Unmarshal(payload, &w); err != nil {
		return s.protocol("has an output chunk that is not one: %v", err)
	}
	chunk := OutputChunk{Display: &w.Output.Display}
	if n, ok := out["step"].(json.Number); ok {
		x, _ := n.Int64()
		chunk.Step = uint32(x)
	}
	s.chunks++
	if onOutput != nil {
		return &callerError{onOutput(chunk)}
	}
	return nil
}

// callerError carries what OnOutput returned (nil included) out of next.
type callerError struct{ err error }

func (e *callerError) Error() string { return "plimsoll: the caller's OnOutput" }

func (s *streamReader) end(payload []byte) error {
	s.ended = true
	m, err := s.parse(payload, endStreamShape, "end-of-stream message")
	if err != nil {
		return err
	}
	if ce, ok := m["error"].(map[string]any); ok {
		b, _ := json.Marshal(ce)
		s.err = decodeError(s.ctx, s.method, http.StatusOK, b)
	}
	return nil
}

// finish is the result at the end of the body, or why there is none.
func (s *streamReader) finish() error {
	if s.err != nil {
		return s.err
	}
	if !s.ended {
		return s.protocol("ends without its end-of-stream message")
	}
	if s.result == nil {
		return s.protocol("ends without a result or an error")
	}
	return s.checkOutput()
}

// checkDisplays: the display outputs given, in order, are the result's
// Outputs.
func (s *streamReader) checkDisplays() error {
	outputs, _ := s.result["outputs"].([]any)
	h := sha256.New()
	var n int64
	for _, d := range outputs {
		line, err := displayLine(d)
		if err != nil {
			return protocolError(s.method, http.StatusOK, err)
		}
		n += int64(len(line))
		h.Write(line)
	}
	got := sha256.Sum256(nil)
	if s.displays.h != nil {
		copy(got[:], s.displays.h.Sum(nil))
	}
	if s.ndisplays != len(outputs) || s.displays.n != n || !bytes.Equal(got[:], h.Sum(nil)) {
		return s.protocol("display outputs are not the result's: %d streamed, %d kept", s.ndisplays, len(outputs))
	}
	return nil
}

// checkOutput: the streamed output, joined, is the result's byte for
// byte: a step's chunks its step's output, the others the run's; the
// display outputs given are the result's. A stream that sent no chunk (a
// kind that does not stream) has nothing to check.
func (s *streamReader) checkOutput() error {
	if len(s.joined) == 0 && s.ndisplays == 0 {
		return nil
	}
	if err := s.checkDisplays(); err != nil {
		return err
	}
	if len(s.joined) == 0 {
		return nil
	}
	steps, _ := s.result["steps"].([]any)
	var maxStep uint32
	for k := range s.joined {
		if k[0] > maxStep {
			maxStep = k[0]
		}
	}
	if int(maxStep) > len(steps) {
		return s.protocol("has output of step %d, but the result has %d steps", maxStep, len(steps))
	}
	want := map[uint32]bool{}
	for k := range s.joined {
		want[k[0]] = true
	}
	if maxStep > 0 {
		for i := 1; i <= len(steps); i++ {
			want[uint32(i)] = true
		}
	}
	for step := uint32(0); int(step) <= len(steps); step++ {
		if !want[step] {
			continue
		}
		where := s.result
		if step > 0 {
			where, _ = steps[step-1].(map[string]any)
		}
		for fd, name := range [2]string{"stdout", "stderr"} {
			text, _ := where[name].(string)
			b64, _ := where[name+"_base64"].(string)
			kept := []byte(text)
			if b64 != "" {
				var err error
				if kept, err = protoBytes(b64, name+"_base64"); err != nil {
					return protocolError(s.method, http.StatusOK, err)
				}
			}
			j := s.joined[[2]uint32{step, uint32(fd)}]
			sum := sha256.Sum256(kept)
			var got int64
			ok := len(kept) == 0
			if j != nil {
				got = j.n
				ok = j.n == int64(len(kept)) && bytes.Equal(j.h.Sum(nil), sum[:])
			}
			if !ok {
				what := name
				if step > 0 {
					what = fmt.Sprintf("step %d's %s", step, name)
				}
				return s.protocol("output of %s is not the result's: %d bytes streamed, %d kept", what, got, len(kept))
			}
		}
	}
	return nil
}

// streamAttempt is one streaming exchange under one deadline: the result
// (as a JSON object, and its bytes), how many chunks were given, or the
// error.
func (c *Client) streamAttempt(ctx context.Context, method string, body []byte, onOutput OnOutput) (map[string]any, []byte, int, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+servicePath+method, bytes.NewReader(envelope(0, body)))
	if err != nil {
		return nil, nil, 0, transportError(err, "%s", method)
	}
	hr.Header.Set("Content-Type", streamMediaType)
	hr.Header.Set("Connect-Protocol-Version", "1")
	hr.Header.Set("Authorization", "Bearer "+c.key.key)
	if r := routeOf(ctx); r != "" {
		hr.Header.Set(RouteHeader, r)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, 0, deadlineError(ctx, method, "waiting for the answer")
		}
		return nil, nil, 0, transportError(err, "%s", method)
	}
	defer resp.Body.Close()
	if resp.ContentLength > c.maxAnswer {
		return nil, nil, 0, protocolError(method, resp.StatusCode,
			fmt.Errorf("its length, %d bytes, is past the client's cap (%d)", resp.ContentLength, c.maxAnswer))
	}
	ctype := resp.Header.Get("Content-Type")
	if resp.StatusCode != http.StatusOK || !mediaTypeIsStream(ctype) {
		data, e := c.readAnswer(ctx, method, resp)
		if e != nil {
			return nil, nil, 0, e
		}
		if int64(len(data)) > c.maxAnswer {
			return nil, nil, 0, protocolError(method, resp.StatusCode,
				fmt.Errorf("it is longer than the client's cap (%d bytes)", c.maxAnswer))
		}
		if resp.StatusCode == http.StatusOK {
			return nil, nil, 0, protocolError(method, http.StatusOK, fmt.Errorf("its Content-Type is %q, not %s", ctype, streamMediaType))
		}
		err = decodeError(ctx, method, resp.StatusCode, data)
		if ctx.Err() != nil {
			return nil, nil, 0, deadlineError(ctx, method, "still decoding the error")
		}
		return nil, nil, 0, err
	}
	s := &streamReader{method: method, ctx: ctx, body: io.LimitReader(resp.Body, c.maxAnswer+1), cap: c.maxAnswer, max: c.maxMessage,
		joined: map[[2]uint32]*joined{}}
	for {
		more, err := s.next(onOutput)
		var ce *callerError
		if errors.As(err, &ce) {
			if ce.err != nil {
				return nil, nil, s.chunks, ce.err
			}
			continue
		}
		if err != nil {
			return nil, nil, s.chunks, err
		}
		if !more {
			break
		}
	}
	if err := s.finish(); err != nil {
		return nil, nil, s.chunks, err
	}
	if ctx.Err() != nil {
		return nil, nil, s.chunks, deadlineError(ctx, method, "still decoding the stream")
	}
	return s.result, s.raw, s.chunks, nil
}

// stream sends a streaming call, retrying as the policy says while no chunk
// was given, and returns its result after the tier re-check.
func (c *Client) stream(ctx context.Context, method string, body []byte, floor string, onOutput OnOutput) (*Result, map[string]any, error) {
	for attempt := 0; ; attempt++ {
		m, data, given, err := c.streamAttempt(ctx, method, body, onOutput)
		if err == nil {
			return c.result(method, m, data, floor)
		}
		if given > 0 || c.retry == nil || !retryable(err) || attempt+1 >= c.retry.MaxAttempts {
			return nil, nil, err
		}
		if err := c.wait(ctx, attempt); err != nil {
			return nil, nil, err
		}
	}
}

// RunStream runs one payload as Run does and calls onOutput (nil: none)
// with its output as the guest writes it, then returns the result, checked
// as Run checks it (the tier re-check, the record). Joined in order, the
// chunks are the result's output byte for byte (a project's: its step's),
// which the client checks. A kind that does not stream
// (OperationSupport.Streams false) gives no chunk, only the result. A
// refusal is Run's refusal (its HTTPStatus is the stream's 200). The
// client's timeout bounds the whole stream.
func (c *Client) RunStream(ctx context.Context, req *RunRequest, onOutput OnOutput) (*Result, error) {
	if req == nil {
		req = &RunRequest{}
	}
	body, sent, err := encode(req)
	if err != nil {
		return nil, err
	}
	res, resp, err := c.stream(ctx, "RunStream", body, req.MinimumIsolation, onOutput)
	if err != nil {
		return nil, err
	}
	empty := ""
	if err := c.checkAlone(sent, resp, &empty); err != nil {
		return nil, err
	}
	return res, nil
}

// RunCellStream is RunCell with its output as it comes, as RunStream
// gives it; like RunCell, it checks the record alone, and takes OnRoute.
func (c *Client) RunCellStream(ctx context.Context, req *RunCellRequest, onOutput OnOutput, opts ...CallOption) (*Result, error) {
	ctx, err := routed(ctx, "RunCellStream", opts)
	if err != nil {
		return nil, err
	}
	body, sent, err := sessionCell(req)
	if err != nil {
		return nil, err
	}
	res, resp, err := c.stream(ctx, "RunCellStream", body, "", onOutput)
	if err != nil {
		return nil, err
	}
	if err := c.checkAlone(sent, resp, nil); err != nil {
		return nil, err
	}
	return res, nil
}

// CellStream is Cell with its output as it comes (RunCellStream); the
// answer extends the session's chain alike.
func (s *Session) CellStream(ctx context.Context, cell *Cell, timeoutMs uint32, onOutput OnOutput) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, sent, err := sessionCell(&RunCellRequest{SessionID: s.ID, Cell: cell, TimeoutMs: timeoutMs})
	if err != nil {
		return nil, err
	}
	res, resp, err := s.c.stream(s.routed(ctx), "RunCellStream", body, s.floor, onOutput)
	if err != nil {
		return nil, err
	}
	if _, err := s.chain.Append(sent, resp); err != nil {
		return nil, err
	}
	return res, nil
}

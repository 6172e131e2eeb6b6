// SPDX-License-Identifier: Apache-2.0
package plimsoll

// A cell's display outputs and a run's usage: what an answer may hold, the
// display chunks of a stream (against a fake daemon), and what the
// harness's docker daemon gives back, unary and streamed, with its
// SANDBOX_DISPLAY_OUTPUTS of 8 (skipped without a docker engine).

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"plimsoll/record"
)

// harnessDisplayOutputs is what the harness's docker daemon keeps of one
// cell's outputs.
const harnessDisplayOutputs = 8

func pngBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// displayCell shows a raw PNG, then an object with an HTML representation
// with display() and as the cell's value, output between them.
const displayCell = `print('before')
display({'image/png': bytes(range(256)), 'text/plain': 'a png'}, raw=True)
class Total:
    def _repr_html_(self): return '<b>42</b>'
    def __repr__(self): return 'Total(42)'
display(Total())
print('after')
Total()
`

var total = map[string]string{"text/html": "<b>42</b>", "text/plain": "Total(42)"}

func checkedAnswer(t *testing.T, text string) error {
	t.Helper()
	v, err := record.Parse([]byte(text))
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return checkAnswer(v, "RunCell")
}

func TestDisplayAndUsageShapes(t *testing.T) {
	png := base64.StdEncoding.EncodeToString(pngBytes())
	good := `{"outputs": [{"kind": "display", "data": {"image/png": "` + png + `", "text/plain": "a png"}},
		{"kind": "result", "data": {"application/json": "{\"a\":1}"}}], "outputs_dropped": 2,
		"usage": {"cpu_user_ms": 5, "cpu_system_ms": 6, "memory_peak_kib": 7, "wall_ms": 8, "source": "cgroup"},
		"steps": [{"usage": {"wall_ms": 3, "source": "cgroup"}}, {}]}`
	if err := checkedAnswer(t, good); err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := decodeInto("RunCell", []byte(good), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != 2 || r.Outputs[0].Kind != DisplayKindDisplay || r.Outputs[1].Kind != DisplayKindResult || r.OutputsDropped != 2 {
		t.Fatalf("%+v", r)
	}
	if b, err := r.Outputs[0].Bytes("image/png"); err != nil || !bytes.Equal(b, pngBytes()) {
		t.Fatalf("png: %v %v", b, err)
	}
	if b, err := r.Outputs[1].Bytes("application/json"); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("json: %q %v", b, err)
	}
	if _, err := r.Outputs[1].Bytes("image/png"); !errors.Is(err, ErrNoSuchType) {
		t.Fatalf("a missing type: %v", err)
	}
	if fmt.Sprint(r.Outputs[0].Types()) != "[image/png text/plain]" {
		t.Fatalf("types %v", r.Outputs[0].Types())
	}
	if r.Usage == nil || *r.Usage != (Usage{5, 6, 7, 8, UsageCgroup}) || r.UsageAbsent != "" {
		t.Fatalf("usage %+v", r.Usage)
	}
	if r.Steps[0].Usage == nil || r.Steps[0].Usage.WallMs != 3 || r.Steps[1].Usage != nil {
		t.Fatalf("steps %+v", r.Steps)
	}
	var none Result
	if err := decodeInto("Run", []byte(`{"usage_absent": "not measured here"}`), &none); err != nil ||
		none.Usage != nil || none.UsageAbsent != "not measured here" || none.Outputs != nil || none.OutputsDropped != 0 {
		t.Fatalf("%+v %v", none, err)
	}
	for _, bad := range []string{
		`{"outputs": {"kind": "display"}}`,
		`{"outputs": [null]}`,
		`{"outputs": [{"kind": "display", "data": ["text/plain"]}]}`,
		`{"outputs": [{"kind": "display", "data": {"text/plain": 1}}]}`,
		`{"outputs": [{"kind": "display", "data": {"text/plain": null}}]}`,
		`{"outputs": [{"kind": 1, "data": {}}]}`,
		`{"outputs": [{"kind": "update", "data": {"text/plain": "x"}}]}`,
		`{"outputs": [{"data": {"text/plain": "x"}}]}`,
		`{"outputs": [{"kind": "display", "data": {"image/png": "not base64!"}}]}`,
		`{"outputs_dropped": -1}`,
		`{"outputs_dropped": "3"}`,
		`{"usage": []}`,
		`{"usage": {"cpu_user_ms": 4294967296}}`,
		`{"usage": {"wall_ms": "1"}}`,
		`{"usage": {"source": 1}}`,
		`{"usage_absent": false}`,
		`{"steps": [{"usage": {"memory_peak_kib": -1}}]}`,
	} {
		if checkedAnswer(t, bad) == nil {
			t.Errorf("taken: %s", bad)
		}
	}
	d := `{"operations": {"display": {"python": true, "javascript": true, "matplotlib": false, "pandas": true}},
		"limits": {"display_outputs": 32, "display_output_bytes": 4194304, "display_bytes": 8388608}}`
	v, _ := record.Parse([]byte(d))
	var desc Description
	if err := checkAnswer(v, "Describe"); err != nil {
		t.Fatal(err)
	}
	if err := decodeInto("Describe", []byte(d), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.Operations.Display != (DisplaySupport{true, true, false, true}) || desc.Limits.DisplayOutputs != 32 ||
		desc.Limits.DisplayOutputBytes != 4194304 || desc.Limits.DisplayBytes != 8388608 {
		t.Fatalf("%+v", desc)
	}
	v, _ = record.Parse([]byte(`{"operations": {"display": {"python": "yes"}}}`))
	if checkAnswer(v, "Describe") == nil {
		t.Fatal("a display support that is not a bool taken")
	}
}

func TestMimeIsText(t *testing.T) {
	for _, m := range []string{"text/plain", "text/csv", "application/json", "application/javascript", "image/svg+xml",
		"application/vnd.plotly.v1+json", "application/rss+xml"} {
		if !MimeIsText(m) {
			t.Errorf("%s is text", m)
		}
	}
	for _, m := range []string{"image/png", "image/jpeg", "application/pdf", "application/octet-stream"} {
		if MimeIsText(m) {
			t.Errorf("%s is not text", m)
		}
	}
}

func displayEnv(kind string, data map[string]string) []byte {
	return envl(0, map[string]any{"output": map[string]any{"display": map[string]any{"kind": kind, "data": data}}})
}

// cellAnswer is a cell's RunResponse with stdout and these outputs, and a
// record right for the cell sent.
func cellAnswer(t *testing.T, stdout string, outputs []any) map[string]any {
	hashed := map[string]any{"cell": map[string]any{"language": "python", "code": "1"}}
	resp := ran(t, hashed, stdout, "process", "")
	if outputs != nil {
		resp["outputs"] = outputs
	}
	reseal(resp)
	return resp
}

func bundle(kind string, data map[string]string) map[string]any {
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	return map[string]any{"kind": kind, "data": d}
}

func cellStream(t *testing.T, b []byte) streamOutcome {
	f := newRawFake(t, body(b))
	c := newClient(t, f.url)
	var o streamOutcome
	o.res, o.err = c.RunCellStream(context.Background(), &RunCellRequest{SessionID: "s1", Cell: &Cell{Language: "python", Code: "1"}},
		func(ch OutputChunk) error {
			o.chunks = append(o.chunks, ch)
			return nil
		})
	return o
}

// events are the chunks as the caller saw them: output runs joined, each
// display as its kind and first type.
func events(chunks []OutputChunk) []string {
	var out []string
	open := false
	for _, c := range chunks {
		if c.Display != nil {
			out = append(out, c.Display.Kind+" "+c.Display.Types()[0])
			open = false
			continue
		}
		if open {
			out[len(out)-1] += string(c.Stdout)
		} else {
			out = append(out, "out:"+string(c.Stdout))
			open = true
		}
	}
	return out
}

func TestStreamDisplays(t *testing.T) {
	png := map[string]string{"image/png": "AAEC"}
	html := map[string]string{"text/html": "<b>42</b>"}
	other := map[string]string{"text/plain": "other"}
	ans := cellAnswer(t, "a\nb\n", []any{bundle("display", png), bundle("result", html)})
	o := cellStream(t, cat(outEnv("a\n", "", 0), displayEnv("display", png), outEnv("b\n", "", 0),
		displayEnv("result", html), resultEnv(ans), endEnv(nil)))
	if o.err != nil {
		t.Fatal(o.err)
	}
	if got := strings.Join(events(o.chunks), "|"); got != "out:a\n|display image/png|out:b\n|result text/html" {
		t.Fatalf("events %q", got)
	}
	if b, _ := o.chunks[1].Display.Bytes("image/png"); !bytes.Equal(b, []byte{0, 1, 2}) || len(o.chunks[1].Stdout) != 0 {
		t.Fatalf("the display chunk %+v", o.chunks[1])
	}
	if len(o.res.Outputs) != 2 || !reflect.DeepEqual(o.res.Outputs[0], *o.chunks[1].Display) {
		t.Fatalf("result %+v", o.res.Outputs)
	}
	// a stream of no chunk has nothing to check
	if o := cellStream(t, cat(resultEnv(cellAnswer(t, "", []any{bundle("display", png)})), endEnv(nil))); o.err != nil {
		t.Fatal(o.err)
	}
	for name, b := range map[string][]byte{
		"not the result's": cat(displayEnv("display", png), resultEnv(cellAnswer(t, "", nil)), endEnv(nil)),
		"held otherwise":   cat(displayEnv("display", other), resultEnv(cellAnswer(t, "", []any{bundle("display", png)})), endEnv(nil)),
		"in another order": cat(displayEnv("result", html), displayEnv("display", png),
			resultEnv(cellAnswer(t, "", []any{bundle("display", png), bundle("result", html)})), endEnv(nil)),
		"never came": cat(outEnv("a", "", 0), resultEnv(cellAnswer(t, "a", []any{bundle("display", png)})), endEnv(nil)),
		"with output bytes": cat(envl(0, map[string]any{"output": map[string]any{"stdout": "YQ==", "display": bundle("display", png)}}),
			resultEnv(cellAnswer(t, "a", []any{bundle("display", png)})), endEnv(nil)),
		"not base64": cat(displayEnv("display", map[string]string{"image/png": "%%"}), resultEnv(cellAnswer(t, "", nil)), endEnv(nil)),
		"no kind":    cat(displayEnv("nope", other), resultEnv(cellAnswer(t, "", nil)), endEnv(nil)),
	} {
		if o := cellStream(t, b); !errors.Is(o.err, ErrProtocol) {
			t.Errorf("%s: %v", name, o.err)
		}
	}
}

func checkDisplayCell(t *testing.T, r *Result) {
	t.Helper()
	if r.ExitCode != 0 || r.Stdout != "before\nafter\n" || len(r.Outputs) != 3 || r.OutputsDropped != 0 {
		t.Fatalf("answer: %s", show(r))
	}
	kinds := []string{r.Outputs[0].Kind, r.Outputs[1].Kind, r.Outputs[2].Kind}
	if fmt.Sprint(kinds) != "[display display result]" {
		t.Fatalf("kinds %v", kinds)
	}
	if b, err := r.Outputs[0].Bytes("image/png"); err != nil || !bytes.Equal(b, pngBytes()) || r.Outputs[0].Data["text/plain"] != "a png" {
		t.Fatalf("png %v %v", r.Outputs[0], err)
	}
	if !reflect.DeepEqual(r.Outputs[1].Data, total) || !reflect.DeepEqual(r.Outputs[2].Data, total) {
		t.Fatalf("html %v", r.Outputs[1:])
	}
}

// checkCgroupUsage: docker measures every run, from the sandbox's cgroup.
func checkCgroupUsage(t *testing.T, u *Usage, absent string) {
	t.Helper()
	if u == nil {
		t.Fatalf("no usage: %q", absent)
	}
	if u.Source != UsageCgroup || u.WallMs == 0 || u.MemoryPeakKiB == 0 || absent != "" {
		t.Fatalf("usage %+v (%q)", u, absent)
	}
}

func TestDisplayLive(t *testing.T) {
	c := sessionClient(t, "PLIMSOLL_TEST_KEY")
	ctx := ctxT(t)
	d, err := c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Operations.Display.Python || !d.Operations.Display.JavaScript || d.Limits.DisplayOutputs != harnessDisplayOutputs {
		t.Fatalf("describe %+v %+v", d.Operations.Display, d.Limits)
	}
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	r, err := s.Cell(ctx, &Cell{Language: "python", Code: displayCell}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDisplayCell(t, r)
	checkCgroupUsage(t, r.Usage, r.UsageAbsent)
	r, err = s.Cell(ctx, &Cell{Language: "javascript", Code: "display({a: 1}); console.log('js')"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "js\n" || len(r.Outputs) != 1 || r.Outputs[0].Kind != DisplayKindDisplay ||
		!reflect.DeepEqual(r.Outputs[0].Data, map[string]string{"application/json": `{"a":1}`}) {
		t.Fatalf("js: %s", show(r))
	}
	r, err = s.Cell(ctx, &Cell{Language: "python", Code: "x = 1"}, 0)
	if err != nil || r.Outputs != nil || r.OutputsDropped != 0 {
		t.Fatalf("a cell that shows nothing: %s %v", show(r), err)
	}
	r, err = s.Cell(ctx, &Cell{Language: "python", Code: fmt.Sprintf("for i in range(%d): display({'text/plain': str(i)}, raw=True)", harnessDisplayOutputs+3)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Outputs) != harnessDisplayOutputs || r.OutputsDropped != 3 || r.Outputs[7].Data["text/plain"] != "7" {
		t.Fatalf("past the bound: %s", show(r))
	}
	var chunks []OutputChunk
	r, err = s.CellStream(ctx, &Cell{Language: "python", Code: displayCell}, 0, func(ch OutputChunk) error {
		chunks = append(chunks, ch)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDisplayCell(t, r)
	if got := strings.Join(events(chunks), "|"); got != "out:before\n|display image/png|display text/html|out:after\n|result text/html" {
		t.Fatalf("events %q", got)
	}
	if s.Chain().Len() != 5 {
		t.Fatalf("chain %d", s.Chain().Len())
	}
	r, err = s.Run(ctx, &RunRequest{Project: &Project{Steps: []Step{{Argv: []string{"true"}}, {Argv: []string{"sh", "-c", "echo hi"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	checkCgroupUsage(t, r.Usage, r.UsageAbsent)
	for _, st := range r.Steps {
		checkCgroupUsage(t, st.Usage, "")
	}
	r, err = c.Run(ctx, py("print(1)"))
	if err != nil {
		t.Fatal(err)
	}
	checkCgroupUsage(t, r.Usage, r.UsageAbsent)
}

// The wasm daemon's usage: present with its source, or absent with why.
func TestUsageWasm(t *testing.T) {
	c := client(t, "PLIMSOLL_TEST_URL")
	r, err := c.Run(ctxT(t), js("console.log(1)"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage == nil {
		if r.UsageAbsent == "" {
			t.Fatalf("neither usage nor why: %s", show(r))
		}
	} else if r.Usage.Source != UsageWorker || r.UsageAbsent != "" {
		t.Fatalf("usage %+v (%q)", r.Usage, r.UsageAbsent)
	}
}

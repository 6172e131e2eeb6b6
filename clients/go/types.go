// SPDX-License-Identifier: Apache-2.0
package plimsoll

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"plimsoll/record"
)

// Isolation tiers, weakest first.
const (
	TierNone      = "none"
	TierProcess   = "process"
	TierContainer = "container"
	TierKernel    = "kernel"
	TierVM        = "vm"
)

// TierRank orders the tiers: none < process < container < kernel < vm. An
// unknown tier is -1, below every floor.
func TierRank(tier string) int {
	switch tier {
	case TierNone:
		return 0
	case TierProcess:
		return 1
	case TierContainer:
		return 2
	case TierKernel:
		return 3
	case TierVM:
		return 4
	}
	return -1
}

// RunRequest is one payload to run: set exactly one of Snippet, Project and
// Module. Only the fields you set are sent (proto field names, no nulls).
type RunRequest struct {
	// MinimumIsolation is the weakest tier you accept; the daemon refuses
	// before running when its tier is lower, and the client re-checks the
	// answer's tier against it.
	MinimumIsolation string `json:"minimum_isolation,omitempty"`
	// GrantProfile names an operator's grant profile.
	GrantProfile string `json:"grant_profile,omitempty"`
	// TimeoutMs: 0 is the daemon's default.
	TimeoutMs uint32 `json:"timeout_ms,omitempty"`
	// MemoryMb: 0 is the per-run allowance; may only lower it.
	MemoryMb uint32   `json:"memory_mb,omitempty"`
	Snippet  *Snippet `json:"snippet,omitempty"`
	Project  *Project `json:"project,omitempty"`
	Module   *Module  `json:"module,omitempty"`
}

// Snippet is code in one language: "javascript" or "python".
type Snippet struct {
	Language string `json:"language,omitempty"`
	Code     string `json:"code,omitempty"`
	Stdin    string `json:"stdin,omitempty"`
	// Collect is globs relative to the work directory whose regular files
	// come back in Result.Artifacts once the guest ended (docs/api.md,
	// "Artifacts"; Describe's Operations.Artifacts.Snippet says where).
	Collect []string `json:"collect,omitempty"`
}

// Project is files and the steps that run over them, in order.
type Project struct {
	Files []File `json:"files,omitempty"`
	Steps []Step `json:"steps,omitempty"`
	// Collect is globs relative to the work directory whose regular files
	// come back in Result.Artifacts once the steps ended (docs/api.md,
	// "Artifacts"; Describe's Operations.Artifacts.Project says where).
	Collect []string `json:"collect,omitempty"`
}

// File is a file of a project or a cell. Its content is sent as
// content_base64 when ContentBase64 is set, as content (even empty)
// otherwise.
type File struct {
	Path          string
	Content       string
	ContentBase64 string
}

// BinaryFile is a file whose bytes are sent as content_base64.
func BinaryFile(path string, data []byte) File {
	return File{Path: path, ContentBase64: base64.StdEncoding.EncodeToString(data)}
}

// MarshalJSON sends exactly one of content and content_base64.
func (f File) MarshalJSON() ([]byte, error) {
	if f.ContentBase64 != "" {
		return json.Marshal(struct {
			Path          string `json:"path"`
			ContentBase64 string `json:"content_base64"`
		}{f.Path, f.ContentBase64})
	}
	return json.Marshal(struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}{f.Path, f.Content})
}

// UnmarshalJSON reads a file in the proto's JSON form.
func (f *File) UnmarshalJSON(data []byte) error {
	var v struct {
		Path          string `json:"path"`
		Content       string `json:"content"`
		ContentBase64 string `json:"content_base64"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*f = File{Path: v.Path, Content: v.Content, ContentBase64: v.ContentBase64}
	return nil
}

// Step is one command of a project; an unnamed step is "step-N".
type Step struct {
	Name string   `json:"name,omitempty"`
	Argv []string `json:"argv,omitempty"`
}

// Module is a WASI preview 1 module.
type Module struct {
	WasmBase64 string   `json:"wasm_base64,omitempty"`
	Args       []string `json:"args,omitempty"`
	Stdin      string   `json:"stdin,omitempty"`
}

// WasmModule is a Module from the module's bytes.
func WasmModule(wasm []byte, args ...string) *Module {
	return &Module{WasmBase64: base64.StdEncoding.EncodeToString(wasm), Args: args}
}

// Cell is code for a session's kept interpreter of its language.
type Cell struct {
	Language string `json:"language,omitempty"`
	Code     string `json:"code,omitempty"`
	Files    []File `json:"files,omitempty"`
}

// OpenSessionRequest optionally hints the languages the session will use.
type OpenSessionRequest struct {
	Languages []string `json:"languages,omitempty"`
	// MinimumIsolation is the Session's floor (client-side; the open call
	// has no field for it): sent as minimum_isolation on every Run that
	// sets none, and checked on every answer, cells included.
	MinimumIsolation string `json:"-"`
}

// RunInSessionRequest runs a snippet or a project in a session.
type RunInSessionRequest struct {
	SessionID string      `json:"session_id"`
	Run       *RunRequest `json:"run,omitempty"`
}

// RunCellRequest runs a cell in a session.
type RunCellRequest struct {
	SessionID string `json:"session_id"`
	Cell      *Cell  `json:"cell,omitempty"`
	TimeoutMs uint32 `json:"timeout_ms,omitempty"`
}

// Result is the answer of a run that ran, whatever its exit code: a
// non-zero ExitCode is a result, never an error.
type Result struct {
	ExitCode        int32  `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMs      uint32 `json:"duration_ms"`
	SandboxName     string `json:"sandbox_name"`
	// Isolation is the tier that actually ran.
	Isolation   string `json:"isolation"`
	TimedOut    bool   `json:"timed_out"`
	OutOfMemory bool   `json:"out_of_memory"`
	// Outcome is completed, setup_failed, timed_out or protocol_error.
	Outcome string       `json:"outcome"`
	Detail  string       `json:"detail"`
	Steps   []StepResult `json:"steps"`
	// Record binds what was sent to what came back (docs/records.md).
	Record *record.Record `json:"record"`
	// StdoutBase64/StderrBase64 hold the exact bytes when they are not
	// valid UTF-8 (Stdout/Stderr then hold a lossy copy).
	StdoutBase64 string `json:"stdout_base64"`
	StderrBase64 string `json:"stderr_base64"`
	// InterpreterStarted (RunCell): the cell began with a fresh interpreter.
	InterpreterStarted bool `json:"interpreter_started"`
	// Artifacts are the files the request's Collect globs matched (a
	// project's or a snippet's), in the walk's order; nil when it named
	// none (or they were not looked for: a setup failure, a run the
	// deadline ended).
	Artifacts []Artifact `json:"artifacts"`
	// ArtifactsTruncated: more files matched than came
	// (SANDBOX_COLLECT_FILES, or the reader's bounds).
	ArtifactsTruncated bool `json:"artifacts_truncated"`
	// Outputs are a cell's display outputs, in the order it produced them
	// (docs/sessions.md, "Display outputs"); nil when it showed nothing.
	Outputs []DisplayOutput `json:"outputs"`
	// OutputsDropped counts the outputs the daemon left out: past
	// SANDBOX_DISPLAY_OUTPUTS, larger than SANDBOX_DISPLAY_OUTPUT_BYTES,
	// past SANDBOX_DISPLAY_BYTES, or not a well-formed bundle.
	OutputsDropped uint32 `json:"outputs_dropped"`
	// Usage is what the run cost, as the provider measured it; nil when it
	// measures nothing, and then UsageAbsent says why.
	Usage       *Usage `json:"usage"`
	UsageAbsent string `json:"usage_absent"`

	// Raw is the answer's JSON body as received.
	Raw json.RawMessage `json:"-"`
}

// StepResult is one project step's answer.
type StepResult struct {
	Name            string `json:"name"`
	ExitCode        int32  `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMs      uint32 `json:"duration_ms"`
	TimedOut        bool   `json:"timed_out"`
	StdoutBase64    string `json:"stdout_base64"`
	StderrBase64    string `json:"stderr_base64"`
	// Usage is what the step cost, where the provider measures it; else nil.
	Usage *Usage `json:"usage"`
}

// Usage sources: what a Usage's figures cover.
const (
	UsageCgroup  = "cgroup"  // the sandbox's cgroup: every process in it
	UsageGVisor  = "gvisor"  // the sandbox's cgroup, gVisor's own Sentry and Gofer included
	UsageWorker  = "worker"  // the wasm worker process
	UsageService = "service" // the hosted service's own metrics
)

// Usage is what a run, or a project's step, cost as the provider measured
// it (docs/api.md, "Usage"). Each figure saturates at 4294967295.
type Usage struct {
	CPUUserMs   uint32 `json:"cpu_user_ms"`
	CPUSystemMs uint32 `json:"cpu_system_ms"`
	// MemoryPeakKiB is the most memory in use at once; 0 when not measured.
	MemoryPeakKiB uint32 `json:"memory_peak_kib"`
	WallMs        uint32 `json:"wall_ms"`
	// Source is what the figures cover: UsageCgroup, UsageGVisor,
	// UsageWorker or UsageService.
	Source string `json:"source"`
}

// Display output kinds (DisplayOutput.Kind).
const (
	DisplayKindDisplay = "display" // from display(), or a figure left open
	DisplayKindResult  = "result"  // the cell's last expression
)

// DisplayOutput is one display output of a cell: a MIME bundle, as
// Jupyter's display_data. Data maps each MIME type to its data as the
// daemon sent it: text for the text types (MimeIsText), base64 for every
// other; Bytes gives any type's exact bytes.
type DisplayOutput struct {
	// Kind is DisplayKindDisplay or DisplayKindResult.
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
}

// MimeIsText says whether a display output carries mime's data as text:
// text/*, application/json, application/javascript, image/svg+xml, *+json
// and *+xml. Every other type comes as base64.
func MimeIsText(mime string) bool {
	return strings.HasPrefix(mime, "text/") || mime == "application/json" ||
		mime == "application/javascript" || mime == "image/svg+xml" ||
		strings.HasSuffix(mime, "+json") || strings.HasSuffix(mime, "+xml")
}

// ErrNoSuchType is Bytes' error for a type the bundle does not hold.
var ErrNoSuchType = errors.New("plimsoll: the display output has no data of that type")

// Bytes is the exact bytes of mime's data: base64 decoded for a binary
// type, the text's UTF-8 for a text type. A type the bundle does not hold
// is ErrNoSuchType.
func (d *DisplayOutput) Bytes(mime string) ([]byte, error) {
	v, ok := d.Data[mime]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchType, mime)
	}
	if MimeIsText(mime) {
		return []byte(v), nil
	}
	b, ok := decodeBase64(v)
	if !ok {
		return nil, fmt.Errorf("plimsoll: the display output's %s data is not base64", mime)
	}
	return b, nil
}

// Types is the bundle's MIME types, sorted.
func (d *DisplayOutput) Types() []string {
	out := make([]string, 0, len(d.Data))
	for k := range d.Data {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func exact(text, b64 string) []byte {
	if b64 != "" {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return b
		}
		if b, err := base64.RawStdEncoding.DecodeString(trimPad(b64)); err == nil {
			return b
		}
	}
	return []byte(text)
}

// StdoutBytes is the exact stdout: stdout_base64 when present, Stdout
// otherwise.
func (r *Result) StdoutBytes() []byte { return exact(r.Stdout, r.StdoutBase64) }

// StderrBytes is the exact stderr.
func (r *Result) StderrBytes() []byte { return exact(r.Stderr, r.StderrBase64) }

// StdoutBytes is the step's exact stdout.
func (s *StepResult) StdoutBytes() []byte { return exact(s.Stdout, s.StdoutBase64) }

// StderrBytes is the step's exact stderr.
func (s *StepResult) StderrBytes() []byte { return exact(s.Stderr, s.StderrBase64) }

// OperationSupport says whether a payload kind runs and how.
type OperationSupport struct {
	Supported    bool     `json:"supported"`
	Engine       string   `json:"engine"`
	MaxTimeoutMs uint32   `json:"max_timeout_ms"`
	Languages    []string `json:"languages"`
	Grants       bool     `json:"grants"`
	// Streams: RunStream (for Session: RunCellStream) sends this kind's
	// output as it comes; when false a stream carries only the result.
	Streams bool `json:"streams"`
}

// Operations is each payload kind's support.
type Operations struct {
	Snippet OperationSupport `json:"snippet"`
	Project OperationSupport `json:"project"`
	Module  OperationSupport `json:"module"`
	Session OperationSupport `json:"session"`
	// Files: a session's file calls (WriteFiles, ReadFile, ListFiles).
	Files OperationSupport `json:"files"`
	// Artifacts says which payloads may name Collect globs.
	Artifacts ArtifactSupport `json:"artifacts"`
	// Display says what a cell can show besides its text.
	Display DisplaySupport `json:"display"`
}

// DisplaySupport says what a cell can show besides its text
// (docs/sessions.md, "Display outputs"), as the daemon's startup test
// found it.
type DisplaySupport struct {
	Python     bool `json:"python"`     // display() and rich values in Python cells
	JavaScript bool `json:"javascript"` // display() in JavaScript cells
	Matplotlib bool `json:"matplotlib"` // an open figure comes back as image/png
	Pandas     bool `json:"pandas"`     // a DataFrame comes back as text/html and text/plain
}

// ArtifactSupport says which payloads may name collect globs.
type ArtifactSupport struct {
	Project bool `json:"project"`
	Snippet bool `json:"snippet"`
}

// Limits are the daemon's configured bounds.
type Limits struct {
	MemoryMb             uint32 `json:"memory_mb"`
	TotalMemoryMb        uint32 `json:"total_memory_mb"`
	MaxConcurrent        uint32 `json:"max_concurrent"`
	EffectiveConcurrency uint32 `json:"effective_concurrency"`
	PerKeyConcurrent     uint32 `json:"per_key_concurrent"`
	RatePerMin           uint32 `json:"rate_per_min"`
	RateBurst            uint32 `json:"rate_burst"`
	DefaultTimeoutMs     uint32 `json:"default_timeout_ms"`
	OutputBytes          uint32 `json:"output_bytes"`
	MaxSnippetBytes      uint32 `json:"max_snippet_bytes"`
	MaxRequestBytes      uint32 `json:"max_request_bytes"`
	MemoryBudgetApplies  bool   `json:"memory_budget_applies"`
	// MinMemoryMb is the least memory_mb the provider accepts; 0: none.
	MinMemoryMb uint32 `json:"min_memory_mb"`
	// FileReadBytes is the most one ReadFile gives (SANDBOX_FILE_READ_BYTES),
	// and what a limit of 0 asks for.
	FileReadBytes uint32 `json:"file_read_bytes"`
	// FileListEntries is the most one ListFiles gives
	// (SANDBOX_FILE_LIST_ENTRIES).
	FileListEntries uint32 `json:"file_list_entries"`
	// SessionMaxLifetimeS is the longest a session may live from its open
	// (SANDBOX_SESSION_MAX_LIFETIME).
	SessionMaxLifetimeS uint32 `json:"session_max_lifetime_s"`
	// CollectFiles is the most artifacts one run gives
	// (SANDBOX_COLLECT_FILES); CollectBytes their bytes in all
	// (SANDBOX_COLLECT_BYTES).
	CollectFiles uint32 `json:"collect_files"`
	CollectBytes uint32 `json:"collect_bytes"`
	// DisplayOutputs is the most display outputs one cell keeps
	// (SANDBOX_DISPLAY_OUTPUTS), DisplayOutputBytes the largest one may be
	// (SANDBOX_DISPLAY_OUTPUT_BYTES), DisplayBytes one cell's in all
	// (SANDBOX_DISPLAY_BYTES).
	DisplayOutputs     uint32 `json:"display_outputs"`
	DisplayOutputBytes uint32 `json:"display_output_bytes"`
	DisplayBytes       uint32 `json:"display_bytes"`
}

// Description is what a daemon is (Describe).
type Description struct {
	Version          string     `json:"version"`
	Provider         string     `json:"provider"`
	Isolation        string     `json:"isolation"`
	Runtime          string     `json:"runtime"`
	Ready            bool       `json:"ready"`
	ReadyDetail      string     `json:"ready_detail"`
	SupportsSessions bool       `json:"supports_sessions"`
	Languages        []string   `json:"languages"`
	Operations       Operations `json:"operations"`
	Limits           Limits     `json:"limits"`
}

// Session states (SessionInfo.State).
const (
	SessionReady  = "ready"  // open, its sandbox running
	SessionPaused = "paused" // open, its sandbox paused for idleness; the next call resumes it
	SessionEnded  = "ended"  // ended: closed, past its lifetime or its disk budget, …
)

// SessionInfo is one of the caller's sessions as the daemon holds it
// (ListSessions, GetSession, ExtendSession). The instants are UTC; an
// instant the daemon gives as "" (none) is the zero time.Time (IsZero).
type SessionInfo struct {
	// SessionID is the session's id (64 hex digits).
	SessionID string
	// State is SessionReady, SessionPaused or SessionEnded.
	State string
	// EndedReason says why it ended; "" unless ended.
	EndedReason string
	CreatedAt   time.Time
	// LastCallAt is the end of its last call; zero before any.
	LastCallAt time.Time
	// IdleDeadline is when the daemon pauses it if no call comes; zero
	// when paused, ended, while a call runs, or where the provider cannot
	// pause.
	IdleDeadline time.Time
	// LifetimeDeadline is when it ends; zero once ended.
	LifetimeDeadline time.Time
	EndedAt          time.Time
	// Calls counts the calls that made a record (runs, cells and file
	// calls).
	Calls uint32
	// CallsWaiting counts the calls running or waiting their turn now.
	CallsWaiting uint32
	// PreviousDigest is the last record's digest ("" before any call): the
	// next call's record names it. ConnectSession starts a chain from it.
	PreviousDigest string
	// Languages is the hint given at open.
	Languages []string
	// Interpreters are the kept interpreters, as the last cleanup between
	// calls found them; empty where the provider reports none.
	Interpreters []SessionInterpreter
	// DiskUsedKiB is its files' size, as the last cleanup measured it.
	DiskUsedKiB uint32
	// DiskBudgetKiB is its disk budget; 0 when none is reported.
	DiskBudgetKiB uint32
	// MaxLifetimeS is the most ExtendSession may give, in seconds from the
	// session's open (the operator's SANDBOX_SESSION_MAX_LIFETIME).
	MaxLifetimeS uint32
	// Route names the daemon that holds the session (its
	// PLIMSOLL_INSTANCE); "" from a daemon older than routes. Behind a
	// proxy, OnRoute(Route) sends a call to it.
	Route string

	// Raw is the session's JSON object as received.
	Raw json.RawMessage `json:"-"`
}

// Ended says whether the session has ended.
func (i *SessionInfo) Ended() bool { return i.State == SessionEnded }

// SessionInterpreter is a kept interpreter of a session.
type SessionInterpreter struct {
	Language string // "python" or "javascript"
	Alive    bool
}

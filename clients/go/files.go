// SPDX-License-Identifier: Apache-2.0
package plimsoll

// A session's files: WriteFiles, ReadFile and ListFiles (on a daemon whose
// Describe says Operations.Files.Supported; elsewhere ErrUnsupported), and
// the Session's conveniences over them: ReadAll, Download and Upload.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"
	"unicode/utf8"

	"plimsoll/record"
)

// The bounds of one WriteFiles call.
const (
	// MaxWriteFiles is the most files one WriteFiles call takes.
	MaxWriteFiles = 256
	// MaxWriteBytes is the most decoded bytes one WriteFiles call takes, its
	// files together (4 MiB).
	MaxWriteBytes = 4 << 20
)

// The types of a FileEntry.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
	FileTypeSymlink   = "symlink"
	FileTypeFIFO      = "fifo"
	FileTypeSocket    = "socket"
	FileTypeDevice    = "device"
	FileTypeOther     = "other"
)

// fileTypeModes are the FileMode type bits of each FileEntry type.
var fileTypeModes = map[string]fs.FileMode{
	FileTypeFile: 0, FileTypeDirectory: fs.ModeDir, FileTypeSymlink: fs.ModeSymlink,
	FileTypeFIFO: fs.ModeNamedPipe, FileTypeSocket: fs.ModeSocket, FileTypeDevice: fs.ModeDevice,
	FileTypeOther: fs.ModeIrregular,
}

// WriteFilesResult is WriteFiles' answer.
type WriteFilesResult struct {
	// Files and Bytes are how many files, and how many bytes in all, were
	// written.
	Files uint32
	Bytes uint32
	// Record binds the call to its answer; a Session's joins its chain.
	Record *record.Record
	// Raw is the answer's JSON body as received.
	Raw json.RawMessage
}

// ReadFileResult is one ReadFile's answer: Length bytes of the file from
// Offset.
type ReadFileResult struct {
	Path string
	// Size is the file's size (4294967295 for that size or more).
	Size   uint32
	Offset uint32
	// Content is the bytes read, exactly (content_base64 decoded when the
	// daemon sent it, the text otherwise); len(Content) == Length.
	Content []byte
	Length  uint32
	// More: bytes remain past Offset+Length; read them with a later offset.
	More   bool
	Record *record.Record
	Raw    json.RawMessage
}

// ListFilesResult is ListFiles' answer.
type ListFilesResult struct {
	// Entries are depth first, each directory's sorted by name.
	Entries []FileEntry
	// Truncated: there were more than Describe's Limits.FileListEntries,
	// and the rest were left out.
	Truncated bool
	Record    *record.Record
	Raw       json.RawMessage
}

// FileEntry is one entry of a listing. Symlinks are listed, never
// followed.
type FileEntry struct {
	// Path is relative to the work directory, a lossy copy when the name is
	// not UTF-8; PathBytes is the name's exact bytes.
	Path      string
	PathBytes []byte
	// Type is one of FileTypeFile, FileTypeDirectory, FileTypeSymlink,
	// FileTypeFIFO, FileTypeSocket, FileTypeDevice and FileTypeOther.
	Type string
	// Size in bytes (4294967295 for that size or more).
	Size uint32
	// Mode is the permission bits (Mode.Perm(), with fs.ModeSetuid,
	// fs.ModeSetgid and fs.ModeSticky) and the type's bits, as
	// fs.FileInfo's Mode: Mode.IsDir(), Mode.IsRegular() hold as Type says.
	Mode fs.FileMode
	// ModifiedAt is in UTC; the zero time when the daemon gave none.
	ModifiedAt time.Time
}

// IsDir says whether the entry is a directory.
func (e FileEntry) IsDir() bool { return e.Type == FileTypeDirectory }

// ---- the calls --------------------------------------------------------------

// fileCall is a file call ready to send: its body, and what its record's
// request_sha256 covers (the request without session_id, as sent).
type fileCall struct {
	method string
	body   []byte
	sent   map[string]any
	path   string // ReadFile: the path and offset its answer must name
	offset uint32
}

func newFileCall(method string, req any) (*fileCall, error) {
	body, m, err := encode(req)
	if err != nil {
		return nil, err
	}
	delete(m, "session_id")
	return &fileCall{method: method, body: body, sent: m}, nil
}

func writeFilesCall(sessionID string, files []File) (*fileCall, error) {
	if sessionID == "" {
		return nil, argumentError("WriteFiles", "session_id: required")
	}
	if len(files) == 0 {
		return nil, argumentError("WriteFiles", "files: at least one file")
	}
	return newFileCall("WriteFiles", struct {
		SessionID string `json:"session_id"`
		Files     []File `json:"files"`
	}{sessionID, files})
}

func readFileCall(sessionID, path string, offset, limit uint32) (*fileCall, error) {
	if sessionID == "" {
		return nil, argumentError("ReadFile", "session_id: required")
	}
	if path == "" {
		return nil, argumentError("ReadFile", "path: required")
	}
	fc, err := newFileCall("ReadFile", struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path"`
		Offset    uint32 `json:"offset,omitempty"`
		Limit     uint32 `json:"limit,omitempty"`
	}{sessionID, path, offset, limit})
	if fc != nil {
		fc.path, fc.offset = path, offset
	}
	return fc, err
}

func listFilesCall(sessionID, path string, depth uint32) (*fileCall, error) {
	if sessionID == "" {
		return nil, argumentError("ListFiles", "session_id: required")
	}
	return newFileCall("ListFiles", struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path,omitempty"`
		Depth     uint32 `json:"depth,omitempty"`
	}{sessionID, path, depth})
}

// sendFiles sends a file call and checks what its request says of the answer
// (a ReadFile answer's path and offset are those asked for), and, with a
// floor, its record's tier (the answer has no tier of its own).
func (c *Client) sendFiles(ctx context.Context, fc *fileCall, floor string) (map[string]any, []byte, error) {
	m, data, err := c.invoke(ctx, fc.method, fc.body)
	if err != nil {
		return nil, nil, err
	}
	if fc.method == "ReadFile" {
		p, _ := m["path"].(string)
		if p != fc.path || uint32Of(m, "offset") != fc.offset {
			return nil, nil, protocolError(fc.method, http.StatusOK,
				bad("ReadFile answers about another path or offset than the one asked for"))
		}
	}
	if floor != "" {
		tiers := map[string]any{}
		if rec, ok := m["record"].(map[string]any); ok {
			tiers["isolation"], tiers["record"] = rec["isolation"], rec
		}
		if err := tierCheck(floor, tiers); err != nil {
			return nil, nil, err
		}
	}
	return m, data, nil
}

// filesAlone is a file call outside a Session: its record is checked alone.
func (c *Client) filesAlone(ctx context.Context, fc *fileCall) (map[string]any, []byte, error) {
	m, data, err := c.sendFiles(ctx, fc, "")
	if err != nil {
		return nil, nil, err
	}
	if err := c.checkAlone(fc.sent, m, nil); err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

// files is a file call of the Session: its answer joins the chain. The
// caller holds s.mu.
func (s *Session) files(ctx context.Context, fc *fileCall) (map[string]any, []byte, error) {
	m, data, err := s.c.sendFiles(s.routed(ctx), fc, s.floor)
	if err != nil {
		return nil, nil, err
	}
	if _, err := s.chain.Append(fc.sent, m); err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

func recordOf(m map[string]any) *record.Record {
	rec, ok := m["record"].(map[string]any)
	if !ok {
		return nil
	}
	r := record.RecordFromValue(rec)
	return &r
}

func writeFilesResultOf(m map[string]any, data []byte) *WriteFilesResult {
	return &WriteFilesResult{Files: uint32Of(m, "files"), Bytes: uint32Of(m, "bytes"),
		Record: recordOf(m), Raw: json.RawMessage(data)}
}

func readFileResultOf(m map[string]any, data []byte) *ReadFileResult {
	// The answer passed its checks (checkReadFile): the content decodes.
	r, _ := readFileOf(m, "ReadFile")
	r.Record, r.Raw = recordOf(m), json.RawMessage(data)
	return r
}

func listFilesResultOf(m map[string]any, data []byte) *ListFilesResult {
	out := &ListFilesResult{Entries: []FileEntry{}, Record: recordOf(m), Raw: json.RawMessage(data)}
	out.Truncated, _ = m["truncated"].(bool)
	list, _ := m["entries"].([]any)
	for i, x := range list {
		// The answer passed its checks (checkListFiles).
		e, _ := fileEntryOf(x.(map[string]any), fmt.Sprintf("ListFiles.entries[%d]", i))
		out.Entries = append(out.Entries, e)
	}
	return out
}

// WriteFiles writes files into a session's work directory, in order (as a
// project's files are): 1 to MaxWriteFiles files of at most MaxWriteBytes
// in all, each path relative (at most 256 bytes, no ".", ".." or empty
// segment). A file there is replaced, the directories on the way are made;
// a symlink on the way, or a write past the session's disk budget, is
// ErrInvalidRequest. This low-level call checks its record alone, as
// RunInSession does; Session.WriteFiles keeps the chain. OnRoute names the
// session's daemon behind a proxy, as for each call by session id.
func (c *Client) WriteFiles(ctx context.Context, sessionID string, files []File, opts ...CallOption) (*WriteFilesResult, error) {
	ctx, err := routed(ctx, "WriteFiles", opts)
	if err != nil {
		return nil, err
	}
	fc, err := writeFilesCall(sessionID, files)
	if err != nil {
		return nil, err
	}
	m, data, err := c.filesAlone(ctx, fc)
	if err != nil {
		return nil, err
	}
	return writeFilesResultOf(m, data), nil
}

// ReadFile reads a regular file of a session's work directory: limit bytes
// from offset (limit 0: Describe's Limits.FileReadBytes, which is also the
// most). A missing file is ErrNotFound; a symlink anywhere on the path, a
// directory, a FIFO or socket, or a file the guest's user cannot read is
// ErrInvalidRequest. It checks its record alone; see Session.ReadFile.
func (c *Client) ReadFile(ctx context.Context, sessionID, path string, offset, limit uint32, opts ...CallOption) (*ReadFileResult, error) {
	ctx, err := routed(ctx, "ReadFile", opts)
	if err != nil {
		return nil, err
	}
	fc, err := readFileCall(sessionID, path, offset, limit)
	if err != nil {
		return nil, err
	}
	m, data, err := c.filesAlone(ctx, fc)
	if err != nil {
		return nil, err
	}
	return readFileResultOf(m, data), nil
}

// ListFiles lists a directory of a session's work directory (path "": the
// work directory itself) depth levels down (0 or 1: its entries; at most
// 16). It checks its record alone; see Session.ListFiles.
func (c *Client) ListFiles(ctx context.Context, sessionID, path string, depth uint32, opts ...CallOption) (*ListFilesResult, error) {
	ctx, err := routed(ctx, "ListFiles", opts)
	if err != nil {
		return nil, err
	}
	fc, err := listFilesCall(sessionID, path, depth)
	if err != nil {
		return nil, err
	}
	m, data, err := c.filesAlone(ctx, fc)
	if err != nil {
		return nil, err
	}
	return listFilesResultOf(m, data), nil
}

// WriteFiles writes files into the session's work directory
// (Client.WriteFiles); its record joins the chain.
func (s *Session) WriteFiles(ctx context.Context, files []File) (*WriteFilesResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeFiles(ctx, files)
}

func (s *Session) writeFiles(ctx context.Context, files []File) (*WriteFilesResult, error) {
	fc, err := writeFilesCall(s.ID, files)
	if err != nil {
		return nil, err
	}
	m, data, err := s.files(ctx, fc)
	if err != nil {
		return nil, err
	}
	return writeFilesResultOf(m, data), nil
}

// ReadFile reads limit bytes of a file from offset (Client.ReadFile); its
// record joins the chain. ReadAll reads a whole file.
func (s *Session) ReadFile(ctx context.Context, path string, offset, limit uint32) (*ReadFileResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readFile(ctx, path, offset, limit)
}

func (s *Session) readFile(ctx context.Context, path string, offset, limit uint32) (*ReadFileResult, error) {
	fc, err := readFileCall(s.ID, path, offset, limit)
	if err != nil {
		return nil, err
	}
	m, data, err := s.files(ctx, fc)
	if err != nil {
		return nil, err
	}
	return readFileResultOf(m, data), nil
}

// ListFiles lists a directory of the session's work directory
// (Client.ListFiles); its record joins the chain.
func (s *Session) ListFiles(ctx context.Context, path string, depth uint32) (*ListFilesResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fc, err := listFilesCall(s.ID, path, depth)
	if err != nil {
		return nil, err
	}
	m, data, err := s.files(ctx, fc)
	if err != nil {
		return nil, err
	}
	return listFilesResultOf(m, data), nil
}

// ---- the conveniences -------------------------------------------------------

// readPages reads a whole file page by page (ReadFile from offset 0 until
// More is false), giving each page's bytes to use, holding the Session for
// the whole read. A page that does not follow from the ones before (another
// offset, no bytes while more remain, a size that changed, an end that is
// not the size) is ErrProtocol.
func (s *Session) readPages(ctx context.Context, path string, use func([]byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var offset uint32
	var size uint32
	for first := true; ; first = false {
		page, err := s.readFile(ctx, path, offset, 0)
		if err != nil {
			return err
		}
		end := uint64(offset) + uint64(page.Length)
		var why string
		switch {
		case !first && page.Size != size:
			why = fmt.Sprintf("the file's size was %d, then %d: it changed between pages", size, page.Size)
		case page.More && page.Length == 0:
			why = "no bytes, yet more remain"
		case page.More && end >= uint64(page.Size):
			why = fmt.Sprintf("more remain past %d bytes of a %d-byte file", end, page.Size)
		case !page.More && end != uint64(page.Size) && page.Size != math.MaxUint32:
			why = fmt.Sprintf("no more past %d bytes of a %d-byte file", end, page.Size)
		case page.More && end > math.MaxUint32:
			why = "the file goes on past 4 GiB, the most a ReadFile offset reaches"
		}
		if why != "" {
			return protocolError("ReadFile", http.StatusOK, bad("ReadAll of %q, the page at %d: %s", path, offset, why))
		}
		if err := use(page.Content); err != nil {
			return err
		}
		if !page.More {
			return nil
		}
		offset, size = uint32(end), page.Size
	}
}

// ReadAll reads a whole file of the session (ReadFile, a page at a time,
// each record joining the chain). A page inconsistent with the ones before
// is ErrProtocol.
func (s *Session) ReadAll(ctx context.Context, path string) ([]byte, error) {
	data := []byte{}
	err := s.readPages(ctx, path, func(b []byte) error {
		data = append(data, b...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Download copies a file of the session to localPath (created or
// truncated, as os.Create does), as ReadAll reads it. On an error the
// local file is removed.
func (s *Session) Download(ctx context.Context, path, localPath string) (err error) {
	f, err := os.Create(localPath)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(localPath)
		}
	}()
	return s.readPages(ctx, path, func(b []byte) error {
		_, err := f.Write(b)
		return err
	})
}

// upload is one local file to send and its path in the session.
type upload struct{ local, remote string }

// Upload copies a local file, or a local directory and the files below it,
// into the session's directory remoteDir ("" for the work directory) under
// its name, as cp -r does, and returns how many files it wrote. A file is
// written as remoteDir/<its name>; a directory's files as
// remoteDir/<its name>/<their paths below it>: local directory proj
// uploaded to "in" writes in/proj/..., to "" proj/.... The name is the last
// element of localPath made absolute ("." is the current directory's
// name); a directory without one, the root, is ErrInvalidRequest.
//
// A directory is walked in lexical order, and only its regular files are
// sent: symlinks (inside it; localPath itself is followed), FIFOs,
// sockets, devices and the like are skipped, and so are empty directories,
// which WriteFiles cannot make. The files go in as few WriteFiles calls as
// the bounds allow (MaxWriteFiles files and MaxWriteBytes bytes each),
// each joining the chain. A file past MaxWriteBytes, or a name that is not
// UTF-8, is refused (ErrInvalidRequest) before anything is sent; a refusal
// of a later call leaves the earlier calls' files written.
func (s *Session) Upload(ctx context.Context, localPath, remoteDir string) (int, error) {
	plan, err := uploadPlan(localPath, remoteDir)
	if err != nil {
		return 0, err
	}
	written := 0
	var batch []File
	bytes := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := s.WriteFiles(ctx, batch); err != nil {
			return err
		}
		written += len(batch)
		batch, bytes = nil, 0
		return nil
	}
	for _, u := range plan {
		data, err := os.ReadFile(u.local)
		if err != nil {
			return written, err
		}
		if len(data) > MaxWriteBytes { // it grew since the walk
			return written, tooLarge(u.local, int64(len(data)))
		}
		if len(batch) == MaxWriteFiles || bytes+len(data) > MaxWriteBytes {
			if err := flush(); err != nil {
				return written, err
			}
		}
		batch = append(batch, fileOf(u.remote, data))
		bytes += len(data)
	}
	return written, flush()
}

func tooLarge(local string, size int64) error {
	return argumentError("Upload", "%s: %d bytes, past MaxWriteBytes (%d bytes, one WriteFiles call's most)",
		local, size, MaxWriteBytes)
}

// fileOf is a File of data: text when it is UTF-8 without NUL, base64
// otherwise.
func fileOf(remote string, data []byte) File {
	if utf8.Valid(data) && !containsNUL(data) {
		return File{Path: remote, Content: string(data)}
	}
	return BinaryFile(remote, data)
}

func containsNUL(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return true
		}
	}
	return false
}

// uploadPlan walks localPath and returns the files to send, in order, each
// under remoteDir/<localPath's name>, refusing a file past MaxWriteBytes or
// a name that is not UTF-8.
func uploadPlan(localPath, remoteDir string) ([]upload, error) {
	info, err := os.Stat(localPath)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(localPath)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(abs) // the root's is a separator
	if os.IsPathSeparator(name[len(name)-1]) {
		return nil, argumentError("Upload", "%s has no name to upload it by", localPath)
	}
	top := path.Join(remoteDir, filepath.ToSlash(name))
	add := func(plan []upload, local, rel string, size int64) ([]upload, error) {
		remote := path.Join(top, rel)
		if !utf8.ValidString(remote) {
			return nil, argumentError("Upload", "%s: its path in the session, %q, is not UTF-8", local, remote)
		}
		if size > MaxWriteBytes {
			return nil, tooLarge(local, size)
		}
		return append(plan, upload{local, remote}), nil
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return nil, argumentError("Upload", "%s: not a regular file or a directory", localPath)
		}
		return add(nil, localPath, "", info.Size())
	}
	plan := []upload{}
	err = fs.WalkDir(os.DirFS(localPath), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() { // a directory, or what is skipped
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		plan, err = add(plan, filepath.Join(localPath, filepath.FromSlash(p)), p, info.Size())
		return err
	})
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// ---- the answers' values ----------------------------------------------------

// decodeBase64 reads base64 as the daemon writes it (padded or not).
func decodeBase64(s string) ([]byte, bool) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	if b, err := base64.RawStdEncoding.DecodeString(trimPad(s)); err == nil {
		return b, true
	}
	return nil, false
}

// readFileOf is a ReadFileResult of an answer that passed its shape check,
// or why it cannot be one: content_base64 that is not base64, a length
// other than the content's.
func readFileOf(m map[string]any, where string) (*ReadFileResult, error) {
	r := &ReadFileResult{Size: uint32Of(m, "size"), Offset: uint32Of(m, "offset"), Length: uint32Of(m, "length")}
	r.Path, _ = m["path"].(string)
	r.More, _ = m["more"].(bool)
	text, _ := m["content"].(string)
	r.Content = []byte(text)
	if b64, _ := m["content_base64"].(string); b64 != "" {
		b, ok := decodeBase64(b64)
		if !ok {
			return r, bad("%s.content_base64 is not base64", where)
		}
		r.Content = b
	}
	if uint64(len(r.Content)) != uint64(r.Length) {
		return r, bad("%s.length is %d, but its content holds %d bytes", where, r.Length, len(r.Content))
	}
	return r, nil
}

// fileEntryOf is a FileEntry of an object that passed its shape check, or
// why it cannot be one: no path, a path_base64 that is not base64, a type
// other than the seven, a mode past the permission bits (07777), a
// modified_at that is not RFC 3339.
func fileEntryOf(m map[string]any, where string) (FileEntry, error) {
	e := FileEntry{Size: uint32Of(m, "size")}
	e.Path, _ = m["path"].(string)
	e.Type, _ = m["type"].(string)
	e.PathBytes = []byte(e.Path)
	if b64, _ := m["path_base64"].(string); b64 != "" {
		b, ok := decodeBase64(b64)
		if !ok {
			return e, bad("%s.path_base64 is not base64", where)
		}
		e.PathBytes = b
	}
	if len(e.PathBytes) == 0 {
		return e, bad("%s has no path", where)
	}
	typeBits, ok := fileTypeModes[e.Type]
	if !ok {
		t := e.Type
		if len(t) > 40 {
			t = t[:40]
		}
		return e, bad("%s.type is %q, not one of file, directory, symlink, fifo, socket, device, other", where, t)
	}
	mode := uint32Of(m, "mode")
	if mode > 0o7777 {
		return e, bad("%s.mode is %#o, past the permission bits (07777)", where, mode)
	}
	e.Mode = typeBits | fs.FileMode(mode&0o777)
	for bit, fm := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if mode&bit != 0 {
			e.Mode |= fm
		}
	}
	t, err := instant(m, "modified_at", where)
	if err != nil {
		return e, err
	}
	e.ModifiedAt = t
	return e, nil
}

func checkReadFile(m map[string]any, where string) error {
	_, err := readFileOf(m, where)
	return err
}

func checkListFiles(m map[string]any, where string) error {
	list, _ := m["entries"].([]any)
	for i, x := range list {
		if _, err := fileEntryOf(x.(map[string]any), fmt.Sprintf("%s.entries[%d]", where, i)); err != nil {
			return err
		}
	}
	return nil
}

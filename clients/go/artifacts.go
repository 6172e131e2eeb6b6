// SPDX-License-Identifier: Apache-2.0
package plimsoll

// A project's or a snippet's artifacts (docs/api.md, "Artifacts"): the
// files its Collect globs matched, as the answer gives them, and SaveArtifacts, which writes
// them below a local directory and never outside it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Artifact is a file a project's or a snippet's Collect globs matched,
// read after its last step or once the snippet's guest ended.
type Artifact struct {
	// Path is relative to the work directory; a lossy copy when the name
	// is not UTF-8, PathBytes holding the exact bytes.
	Path      string
	PathBytes []byte
	// Size is the file's size (4294967295 for that size or more).
	Size uint32
	// Content is the bytes that came: all of them unless Truncated (the
	// run's SANDBOX_COLLECT_BYTES ran out).
	Content   []byte
	Truncated bool
}

// UnmarshalJSON reads an artifact in the proto's JSON form, the exact
// bytes of path_base64 and content_base64 when present.
func (a *Artifact) UnmarshalJSON(data []byte) error {
	var v struct {
		Path          string `json:"path"`
		PathBase64    string `json:"path_base64"`
		Size          uint32 `json:"size"`
		Content       string `json:"content"`
		ContentBase64 string `json:"content_base64"`
		Truncated     bool   `json:"truncated"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*a = Artifact{Path: v.Path, PathBytes: []byte(v.Path), Size: v.Size, Content: []byte(v.Content), Truncated: v.Truncated}
	if v.PathBase64 != "" {
		b, ok := decodeBase64(v.PathBase64)
		if !ok {
			return errors.New("an artifact's path_base64 is not base64")
		}
		a.PathBytes = b
	}
	if v.ContentBase64 != "" {
		b, ok := decodeBase64(v.ContentBase64)
		if !ok {
			return errors.New("an artifact's content_base64 is not base64")
		}
		a.Content = b
	}
	return nil
}

// artifactSegments are the names of an artifact's path, or why it could
// land outside the directory it is saved below: empty, absolute, or with
// an empty, "." or ".." segment (or a NUL).
func artifactSegments(path []byte) ([]string, error) {
	if len(path) == 0 || path[0] == '/' || bytes.IndexByte(path, 0) >= 0 {
		return nil, argumentError("SaveArtifacts", "artifact path %q is empty or absolute; not saved", path)
	}
	var out []string
	for _, seg := range bytes.Split(path, []byte("/")) {
		s := string(seg)
		if s == "" || s == "." || s == ".." {
			return nil, argumentError("SaveArtifacts", "artifact path %q has an empty, \".\" or \"..\" segment; not saved", path)
		}
		out = append(out, s)
	}
	return out, nil
}

// Save writes the artifact's Content at its PathBytes below dir (made if
// missing), making the directories between, and returns the file's path.
// A path that is absolute or has an empty, "." or ".." segment, or one
// that would pass through a symlink that exists below dir (its last
// name included), is ErrInvalidRequest and nothing is written; an
// existing file is replaced. A truncated artifact is saved with the bytes
// that came.
func (a *Artifact) Save(dir string) (string, error) {
	segs, err := artifactSegments(a.PathBytes)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	at := dir
	for i, seg := range segs {
		at = filepath.Join(at, seg)
		st, err := os.Lstat(at)
		switch {
		case err == nil && st.Mode()&fs.ModeSymlink != 0:
			return "", argumentError("SaveArtifacts", "artifact %q: %s is a symlink; not saved", a.PathBytes, at)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", err
		case i < len(segs)-1 && err != nil:
			if err := os.Mkdir(at, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		case i < len(segs)-1 && !st.IsDir():
			return "", fmt.Errorf("plimsoll: artifact %q: %s is not a directory", a.PathBytes, at)
		}
	}
	f, err := os.OpenFile(at, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o666)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(a.Content); err != nil {
		f.Close()
		return "", err
	}
	return at, f.Close()
}

// SaveArtifacts saves every artifact below dir (Artifact.Save) and
// returns their paths. Every path is checked before any file is written;
// a symlink met on the way stops the saving there.
func (r *Result) SaveArtifacts(dir string) ([]string, error) {
	for i := range r.Artifacts {
		if _, err := artifactSegments(r.Artifacts[i].PathBytes); err != nil {
			return nil, err
		}
	}
	var out []string
	for i := range r.Artifacts {
		p, err := r.Artifacts[i].Save(dir)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

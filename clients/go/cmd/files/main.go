// Command files writes, lists and reads a session's files on the daemon at
// $PLIMSOLL_URL, and copies a local directory in and a file back out.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

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

	// WriteFiles: text as it is, bytes with BinaryFile; directories are made.
	w, err := s.WriteFiles(ctx, []plimsoll.File{
		{Path: "in/greeting.txt", Content: "hello\n"},
		plimsoll.BinaryFile("in/data.bin", []byte{0, 1, 2, 255}),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", w.Files, "files,", w.Bytes, "bytes")

	// The session's code sees them, and what it writes can be read back.
	cell := &plimsoll.Cell{Language: "python",
		Code: "_ = open('out.txt', 'w').write(open('in/greeting.txt').read().upper())"}
	if _, err := s.Cell(ctx, cell, 0); err != nil {
		log.Fatal(err)
	}

	// ListFiles: depth 2 lists the work directory and one level below.
	list, err := s.ListFiles(ctx, "", 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range list.Entries {
		fmt.Println(e.Type, e.Path, e.Mode.Perm())
	}

	// ReadFile: limit bytes from offset; Content is the exact bytes.
	part, err := s.ReadFile(ctx, "in/data.bin", 1, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Content, "of", part.Size, "bytes; more:", part.More)

	// ReadAll: a whole file, page by page.
	out, err := s.ReadAll(ctx, "out.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", out)
	_, err = s.ReadAll(ctx, "missing.txt")
	fmt.Println("missing:", errors.Is(err, plimsoll.ErrNotFound))

	// Upload a local directory under its name, as cp -r copies it (local
	// proj/main.py to proj/main.py; to remoteDir "in", in/proj/main.py),
	// and Download a file.
	dir, err := os.MkdirTemp("", "plimsoll-files")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "main.py"), []byte("print('uploaded')\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	n, err := s.Upload(ctx, proj, "")
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Cell(ctx, &plimsoll.Cell{Language: "python", Code: "exec(open('proj/main.py').read())"}, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(n, " uploaded: ", res.Stdout)
	if err := s.Download(ctx, "out.txt", filepath.Join(dir, "out.txt")); err != nil {
		log.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("downloaded %q\n", got)

	// Each file call's record joined the session's chain, as a cell's does.
	fmt.Println(s.Chain().Len(), "records")
}

// SPDX-License-Identifier: Apache-2.0
package plimsoll

// Where a client's URL and key come from (docs/clients.md,
// "Configuration"): the argument given, else PLIMSOLL_URL (default
// DefaultURL) and PLIMSOLL_KEY, or the first line of the file
// PLIMSOLL_KEY_FILE; both trimmed. No error made here contains any part of
// a key, and no format of a Client shows it.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultURL is the daemon's address when neither NewClient nor
// PLIMSOLL_URL gives one.
const DefaultURL = "http://127.0.0.1:7475"

// maxKeyFileBytes is the most of a key file read to find its first line.
const maxKeyFileBytes = 65536

// whitespace is what is trimmed off both ends of the URL and the key.
const whitespace = " \t\r\n\v\f"

// bearer holds the API key. A Client keeps a pointer to it, which every
// fmt verb of a Client's fields prints as an address; its own String,
// GoString and Format never show the key.
type bearer struct{ key string }

func (b *bearer) String() string {
	if b == nil || b.key == "" {
		return "plimsoll.key(none)"
	}
	return "plimsoll.key(hidden)"
}

func (b *bearer) GoString() string { return b.String() }

func (b *bearer) Format(f fmt.State, verb rune) { io.WriteString(f, b.String()) }

// configError is the error of a client's wrong settings: ErrConfiguration,
// code invalid_argument, nothing dispatched. path, when set, is in
// Metadata["path"]; cause is what the OS said, never anything of a key.
func configError(path string, cause error, format string, args ...any) *Error {
	e := &Error{Reason: ReasonConfiguration, Code: "invalid_argument", Message: fmt.Sprintf(format, args...),
		Metadata: map[string]string{}, cause: cause}
	if path != "" {
		e.Metadata["path"] = path
	}
	return e
}

// whatIsWrong says why key (trimmed) cannot be sent as a bearer key, or
// "": the daemon takes visible ASCII only. Never a character of the key.
func whatIsWrong(key string) string {
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\n' || c == '\r':
			return "contains a line break"
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		case c == ' ':
			return "contains a space"
		case c > 0x7f:
			return "contains a character that is not ASCII"
		}
	}
	return ""
}

// checkKey is key trimmed, or the error saying what is wrong with it.
func checkKey(key, source string) (string, error) {
	key = strings.Trim(key, whitespace)
	if why := whatIsWrong(key); why != "" {
		return "", configError("", nil, "the API key %s %s (the key is not shown)", source, why)
	}
	return key, nil
}

// osReason is what the OS said about a file ("no such file or directory").
func osReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readKeyFile is the first line of the key file, trimmed and checked.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err == nil {
		var data []byte
		data, err = io.ReadAll(io.LimitReader(f, maxKeyFileBytes))
		f.Close()
		if err == nil {
			line, _, _ := strings.Cut(string(data), "\n")
			key, err := checkKey(line, "in the key file "+path+" (PLIMSOLL_KEY_FILE)")
			if err != nil {
				return "", err
			}
			if key == "" {
				return "", configError(path, nil, "PLIMSOLL_KEY_FILE: the key file %s holds no key (its first line is empty)", path)
			}
			return key, nil
		}
	}
	return "", configError(path, err, "PLIMSOLL_KEY_FILE: cannot read the key file %s: %s", path, osReason(err))
}

// resolveURL is url, else PLIMSOLL_URL, else DefaultURL; trimmed.
func resolveURL(url string) string {
	if u := strings.Trim(url, whitespace); u != "" {
		return u
	}
	if u := strings.Trim(os.Getenv("PLIMSOLL_URL"), whitespace); u != "" {
		return u
	}
	return DefaultURL
}

// resolveKey is apiKey, else PLIMSOLL_KEY, else the first line of the
// file PLIMSOLL_KEY_FILE; trimmed and checked. A key empty once trimmed is
// not given; no key anywhere is the empty key.
func resolveKey(apiKey string) (*bearer, error) {
	k, err := checkKey(apiKey, "given to NewClient")
	if err != nil || k != "" {
		return &bearer{k}, err
	}
	if k, err = checkKey(os.Getenv("PLIMSOLL_KEY"), "from PLIMSOLL_KEY"); err != nil || k != "" {
		return &bearer{k}, err
	}
	if path := os.Getenv("PLIMSOLL_KEY_FILE"); path != "" {
		k, err = readKeyFile(path)
		return &bearer{k}, err
	}
	return &bearer{}, nil
}

// String is the client without its key: its URL.
func (c *Client) String() string {
	if c == nil {
		return "plimsoll.Client(nil)"
	}
	return "plimsoll.Client(" + c.url + ")"
}

// GoString is String: %#v shows no key either.
func (c *Client) GoString() string { return c.String() }

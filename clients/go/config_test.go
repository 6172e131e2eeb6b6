// SPDX-License-Identifier: Apache-2.0
package plimsoll

// The client's configuration (docs/clients.md, "Configuration"): the URL
// and the key from the environment, their precedence and trimming, the key
// file's errors, and no key in any error or format of the client. Against
// a fake daemon: no harness needed.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// authFake answers every call with {} (or what status says) and keeps the
// Authorization header of each.
type authFake struct {
	mu     sync.Mutex
	auth   []string
	status int
	url    string
}

func newAuthFake(t *testing.T) *authFake {
	f := &authFake{status: 200}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		status := f.status
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status == 200 {
			w.Write([]byte("{}"))
			return
		}
		w.Write([]byte(`{"code":"unauthenticated","message":"no such key","details":[{"type":"google.rpc.ErrorInfo","value":"","debug":{"reason":"UNAUTHENTICATED","domain":"plimsoll","metadata":{"dispatched":"false"}}}]}`))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *authFake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.auth)
}

// sentAuth is the Authorization header c sends, by a Describe.
func (f *authFake) sentAuth(t *testing.T, c *Client) string {
	t.Helper()
	if _, err := c.Describe(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auth[len(f.auth)-1]
}

// setEnv sets the three variables exactly as given (an absent one empty,
// which is unset to the client), for the test's length.
func setEnv(t *testing.T, vars map[string]string) {
	for _, k := range []string{"PLIMSOLL_URL", "PLIMSOLL_KEY", "PLIMSOLL_KEY_FILE"} {
		t.Setenv(k, vars[k])
	}
}

// secretKey is a key to recognise: never a substring of a message by chance.
func secretKey(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "plk_" + hex.EncodeToString(b)
}

// assertHides fails when text holds any 6 characters of key in a row.
func assertHides(t *testing.T, key, text string) {
	t.Helper()
	for i := 0; i+6 <= len(key); i++ {
		if strings.Contains(text, key[i:i+6]) {
			t.Fatalf("%q of the key is shown: %s", key[i:i+6], text)
		}
	}
}

// everythingSaid is all an error shows: its text, its formats and those of
// every error it wraps.
func everythingSaid(err error) string {
	var parts []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		parts = append(parts, e.Error(), fmt.Sprintf("%v %+v %#v %s %q", e, e, e, e, e))
	}
	return strings.Join(parts, "\n")
}

func writeKeyFile(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFromTheEnvironmentAlone(t *testing.T) {
	f := newAuthFake(t)
	key := secretKey(t)
	setEnv(t, map[string]string{"PLIMSOLL_URL": f.url, "PLIMSOLL_KEY": key})
	c, err := NewClient("", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); got != "Bearer "+key {
		t.Fatalf("sent %q", got)
	}
}

func TestConfigNothingSetIsTheDefaultURLAndNoKey(t *testing.T) {
	setEnv(t, nil)
	c, err := NewClient("", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.url != DefaultURL || DefaultURL != "http://127.0.0.1:7475" || c.base != DefaultURL {
		t.Fatalf("url %q, base %q", c.url, c.base)
	}
	f := newAuthFake(t)
	c, err = NewClient(f.url, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); got != "Bearer" && got != "Bearer " { // keyless, as the client always was
		t.Fatalf("sent %q", got)
	}
}

func TestConfigKeyFileWithATrailingNewline(t *testing.T) {
	f := newAuthFake(t)
	key := secretKey(t)
	dir := t.TempDir()
	for _, text := range []string{key + "\n", key + "\r\n", "  " + key + "\t\n", key + "\nsecond line\n", key} {
		setEnv(t, map[string]string{"PLIMSOLL_URL": f.url, "PLIMSOLL_KEY_FILE": writeKeyFile(t, dir, text)})
		c, err := NewClient("", "")
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := f.sentAuth(t, c); got != "Bearer "+key {
			t.Fatalf("%q: sent %q", text, got)
		}
	}
}

func TestConfigKeyWinsOverKeyFile(t *testing.T) {
	f := newAuthFake(t)
	key, other := secretKey(t), secretKey(t)
	dir := t.TempDir()
	path := writeKeyFile(t, dir, other+"\n")
	for _, tc := range []struct{ key, file, want string }{
		{key, path, key},
		{key, filepath.Join(dir, "missing"), key}, // the file is not even read
		{" \n", path, other},                      // an empty PLIMSOLL_KEY is not set
	} {
		setEnv(t, map[string]string{"PLIMSOLL_URL": f.url, "PLIMSOLL_KEY": tc.key, "PLIMSOLL_KEY_FILE": tc.file})
		c, err := NewClient("", "")
		if err != nil {
			t.Fatal(err)
		}
		if got := f.sentAuth(t, c); got != "Bearer "+tc.want {
			t.Fatalf("sent %q", got)
		}
	}
}

func TestConfigArgumentsWinOverTheEnvironment(t *testing.T) {
	f := newAuthFake(t)
	key, envKey := secretKey(t), secretKey(t)
	dir := t.TempDir()
	setEnv(t, map[string]string{"PLIMSOLL_URL": "http://127.0.0.1:1", "PLIMSOLL_KEY": envKey,
		"PLIMSOLL_KEY_FILE": writeKeyFile(t, dir, secretKey(t)+"\n")})
	c, err := NewClient(f.url, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); c.url != f.url || got != "Bearer "+key {
		t.Fatalf("%s sent %q", c, got)
	}
	if c, err = NewClient(f.url, ""); err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); got != "Bearer "+envKey {
		t.Fatalf("sent %q", got)
	}
	if c, err = NewClient("", key); err != nil || c.url != "http://127.0.0.1:1" {
		t.Fatalf("%v %v", c, err)
	}
	setEnv(t, map[string]string{"PLIMSOLL_KEY_FILE": filepath.Join(dir, "missing")})
	if c, err = NewClient(f.url, key); err != nil { // no file is read for a given key
		t.Fatal(err)
	}
}

func TestConfigGivenKeyAndURLAreTrimmed(t *testing.T) {
	f := newAuthFake(t)
	key := secretKey(t)
	setEnv(t, nil)
	c, err := NewClient(" "+f.url+"\n", key+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); c.url != f.url || got != "Bearer "+key {
		t.Fatalf("%s sent %q", c, got)
	}
	setEnv(t, map[string]string{"PLIMSOLL_URL": f.url + "\n", "PLIMSOLL_KEY": "\t" + key + "\r\n"})
	if c, err = NewClient("", ""); err != nil {
		t.Fatal(err)
	}
	if got := f.sentAuth(t, c); got != "Bearer "+key {
		t.Fatalf("sent %q", got)
	}
}

func assertKeyFileError(t *testing.T, f *authFake, path, why string) *Error {
	t.Helper()
	setEnv(t, map[string]string{"PLIMSOLL_URL": f.url, "PLIMSOLL_KEY_FILE": path})
	c, err := NewClient("", "")
	if err == nil {
		t.Fatalf("%s made", c)
	}
	var e *Error
	if !errors.Is(err, ErrConfiguration) || !errors.As(err, &e) {
		t.Fatalf("%T %v", err, err)
	}
	if e.Code != "invalid_argument" || e.Dispatched || e.Metadata["path"] != path {
		t.Fatalf("%+v", e)
	}
	for _, want := range []string{"cannot read the key file " + path + ": " + why, "PLIMSOLL_KEY_FILE"} {
		if why != "" && !strings.Contains(err.Error(), want) {
			t.Fatalf("%q lacks %q", err, want)
		}
	}
	if f.calls() != 0 {
		t.Fatal("something was sent")
	}
	return e
}

func TestConfigMissingKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "key")
	e := assertKeyFileError(t, newAuthFake(t), path, "no such file or directory")
	if !errors.Is(e, fs.ErrNotExist) {
		t.Fatalf("%v does not wrap fs.ErrNotExist", e)
	}
}

func TestConfigKeyFileIsADirectory(t *testing.T) {
	assertKeyFileError(t, newAuthFake(t), t.TempDir(), "is a directory")
}

func TestConfigKeyFileNotReadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a file of mode 000")
	}
	path := writeKeyFile(t, t.TempDir(), secretKey(t)+"\n")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	assertKeyFileError(t, newAuthFake(t), path, "permission denied")
}

func TestConfigEmptyKeyFile(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{"", "\n", "  \n" + secretKey(t) + "\n"} {
		path := writeKeyFile(t, dir, text)
		setEnv(t, map[string]string{"PLIMSOLL_KEY_FILE": path})
		_, err := NewClient("", "")
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrConfiguration) || e.Metadata["path"] != path ||
			!strings.Contains(err.Error(), "the key file "+path+" holds no key") {
			t.Fatalf("%q: %v", text, err)
		}
	}
}

func TestConfigAKeyThatCannotBeSentIsNotShown(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"\n": "contains a line break", "\r": "contains a line break",
		"\x00": "contains a control character", "\x1b": "contains a control character",
		"\x7f": "contains a control character", " ": "contains a space",
		"\u00e9": "contains a character that is not ASCII", "\u2028": "contains a character that is not ASCII",
	}
	for bad, why := range cases {
		key := secretKey(t)
		broken := key[:25] + bad + key[25:]
		type source struct{ key, envKey, file string }
		sources := []source{{key: broken}}
		if bad != "\x00" { // no environment holds a NUL
			sources = append(sources, source{envKey: broken})
		}
		if bad != "\n" {
			sources = append(sources, source{file: writeKeyFile(t, dir, broken+"\n")})
		}
		for _, s := range sources {
			setEnv(t, map[string]string{"PLIMSOLL_KEY": s.envKey, "PLIMSOLL_KEY_FILE": s.file})
			c, err := NewClient("http://127.0.0.1:1", s.key)
			if err == nil {
				t.Fatalf("%q: %s made", bad, c)
			}
			if !errors.Is(err, ErrConfiguration) || !strings.Contains(err.Error(), "the API key") ||
				!strings.Contains(err.Error(), why) {
				t.Fatalf("%q: %v", bad, err)
			}
			if errors.Unwrap(err) != nil {
				t.Fatalf("%q: wraps %v", bad, errors.Unwrap(err))
			}
			assertHides(t, key, everythingSaid(err))
		}
	}
}

func TestConfigNoFormatOfAClientShowsItsKey(t *testing.T) {
	f := newAuthFake(t)
	key := secretKey(t)
	setEnv(t, map[string]string{"PLIMSOLL_URL": f.url, "PLIMSOLL_KEY": key})
	for _, apiKey := range []string{"", key} {
		c, err := NewClient("", apiKey)
		if err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c, c, c) +
			fmt.Sprintf("%v %+v %#v", []*Client{c}, struct{ C *Client }{c}, map[string]*Client{"c": c}) +
			fmt.Sprintf("%v %+v %#v %s", c.key, c.key, c.key, c.key)
		assertHides(t, key, text)
		if !strings.Contains(c.String(), f.url) {
			t.Fatal(c.String())
		}
	}
}

func TestConfigARefusedKeyIsNotInTheError(t *testing.T) {
	f := newAuthFake(t)
	f.status = 401
	key := secretKey(t)
	setEnv(t, map[string]string{"PLIMSOLL_KEY": key})
	c, err := NewClient(f.url, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Describe(context.Background())
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatal(err)
	}
	assertHides(t, key, everythingSaid(err))
	dead, err := NewClient("http://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = dead.Describe(context.Background())
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatal(err)
	}
	assertHides(t, key, everythingSaid(err))
}

func TestConfigBadURLIsAConfigurationError(t *testing.T) {
	setEnv(t, map[string]string{"PLIMSOLL_URL": "ftp://example"})
	_, err := NewClient("", "")
	if !errors.Is(err, ErrConfiguration) || !strings.Contains(err.Error(), "ftp://example") {
		t.Fatal(err)
	}
}

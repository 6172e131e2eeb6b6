// SPDX-License-Identifier: Apache-2.0
// Package record checks plimsoll's run records and keeps a session's chain
// of them (docs/records.md, docs/clients.md).
//
// The canonical form is RFC 8785 (JSON Canonicalization Scheme) on the
// values plimsoll's messages use: objects with sorted keys, no whitespace,
// strings escaping only what JSON requires, integers in plain decimal. Go's
// encoding/json is not canonical (it escapes <, >, &, U+2028 and U+2029),
// so this package writes the canonical form itself.
package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the canonical form of v.
//
// v may be a decoded JSON value (map[string]any, []any, string, bool, nil,
// json.Number, an integer type, or an integral float64), a json.RawMessage
// holding JSON text, a Record, or any other value encoding/json can marshal
// (which is marshalled first and then canonicalized). A fractional or
// non-finite number has no canonical form here and is an error, as is a
// string that is not valid UTF-8.
func Canonical(v any) ([]byte, error) {
	val, err := toValue(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeValue(&buf, val); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SHA256Hex returns the lowercase hex SHA-256 of the canonical form of v.
func SHA256Hex(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Parse decodes JSON text into a generic value (map[string]any, []any,
// string, bool, nil, json.Number), keeping every number exact. Text after
// the value is an error.
func Parse(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("record: invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("record: invalid JSON: data after the value")
	}
	return v, nil
}

// toValue turns v into a generic JSON value.
func toValue(v any) (any, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return Parse(x)
	case Record:
		return x.Map(), nil
	case *Record:
		if x == nil {
			return nil, nil
		}
		return x.Map(), nil
	case nil, string, bool, json.Number, map[string]any, []any,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float64, float32:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return Parse(b)
}

func writeValue(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		return writeString(buf, x)
	case json.Number:
		return writeNumber(buf, string(x))
	case int:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int8:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int16:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int32:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case uint:
		buf.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint8:
		buf.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint16:
		buf.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint32:
		buf.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint64:
		buf.WriteString(strconv.FormatUint(x, 10))
	case float32:
		return writeFloat(buf, float64(x))
	case float64:
		return writeFloat(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeValue(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		// A nested value of another Go type: go through encoding/json.
		val, err := toValue(v)
		if err != nil {
			return err
		}
		if reflect.TypeOf(val) == reflect.TypeOf(v) {
			return fmt.Errorf("record: no canonical form for %T", v)
		}
		return writeValue(buf, val)
	}
	return nil
}

// writeNumber writes a JSON number's text as a plain decimal integer, or
// refuses it when it is not an integer.
func writeNumber(buf *bytes.Buffer, s string) error {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return fmt.Errorf("record: %q is not an integer; plimsoll's values have no fractional numbers", s)
	}
	buf.WriteString(n.String())
	return nil
}

func writeFloat(buf *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("record: %v has no canonical form here (integers only)", f)
	}
	buf.WriteString(strconv.FormatInt(int64(f), 10))
	return nil
}

const hexDigits = "0123456789abcdef"

func writeString(buf *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return errors.New("record: a string is not valid UTF-8")
	}
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if c < 0x20 {
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			} else {
				buf.WriteByte(c)
			}
		}
	}
	buf.WriteByte('"')
	return nil
}

// lessUTF16 orders keys by their UTF-16 code units, as RFC 8785 does.
func lessUTF16(a, b string) bool {
	ascii := true
	for i := 0; i < len(a) && ascii; i++ {
		ascii = a[i] < 0x80
	}
	for i := 0; i < len(b) && ascii; i++ {
		ascii = b[i] < 0x80
	}
	if ascii {
		return a < b
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

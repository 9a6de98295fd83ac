package flow

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Frame is a decoded channel/frame notification (PROTOCOL.md §4). Channel
// and SubscriptionID are copies; the data is kept as the still-escaped span
// of the input, and AppendData decodes it straight into the receiver's
// buffer, so a frame's payload is copied once.
type Frame struct {
	Channel        string
	SubscriptionID string
	MessageID      int64
	Final          bool
	rawData        []byte // escaped JSON string body, aliases the input
	dataEscaped    bool   // rawData contains a backslash
	hasData        bool
	hasMessageID   bool
}

// Errors of DecodeFrame. ErrNotFrame means the text is valid JSON-RPC
// framing-wise but not a channel/frame notification; the caller decodes it
// as an ordinary message.
var (
	ErrNotFrame   = errors.New("flow: not a channel/frame notification")
	ErrBadJSON    = errors.New("flow: malformed JSON")
	ErrBadFrame   = errors.New("flow: invalid channel/frame params")
	ErrSurrogate  = errors.New("flow: lone UTF-16 surrogate in string")
	errNumberForm = errors.New("flow: messageId must be a positive safe integer")
)

// DecodeFrame decodes one WebSocket text message into f without
// reflection. It returns ErrNotFrame (possibly wrapped) when the message is
// not a channel/frame notification, ErrBadJSON for malformed JSON and
// ErrBadFrame when the params are missing or of the wrong type. The data
// field is validated by AppendData. f aliases b until AppendData is done.
func DecodeFrame(b []byte, f *Frame) error {
	*f = Frame{}
	d := decoder{b: b}
	d.ws()
	if !d.consume('{') {
		return fmt.Errorf("%w: expected object", ErrBadJSON)
	}
	var method, version []byte
	var params []byte
	isFrame := false
	hasID := false
	parsed := false
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "jsonrpc":
			s, _, err := d.str()
			version = s
			return err
		case "method":
			s, _, err := d.str()
			method = s
			isFrame = string(s) == "channel/frame"
			return err
		case "params":
			if isFrame && !parsed {
				// The usual order (method before params): decode in
				// place, scanning the payload once.
				parsed = true
				return decodeFrameParams(&d, f)
			}
			start := d.i
			if err := d.skip(); err != nil {
				return err
			}
			params = b[start:d.i]
			return nil
		case "id":
			hasID = true
			return d.skip()
		default:
			return d.skip()
		}
	})
	if err != nil {
		return err
	}
	d.ws()
	if d.i != len(b) {
		return fmt.Errorf("%w: trailing data", ErrBadJSON)
	}
	if !isFrame || hasID {
		return fmt.Errorf("%w: method %q", ErrNotFrame, method)
	}
	if string(version) != "2.0" {
		return fmt.Errorf("%w: jsonrpc must be \"2.0\"", ErrBadFrame)
	}
	if parsed {
		return nil
	}
	if params == nil {
		return fmt.Errorf("%w: params missing", ErrBadFrame)
	}
	return decodeFrameParams(&decoder{b: params}, f)
}

func decodeFrameParams(d *decoder, f *Frame) error {
	d.ws()
	if !d.consume('{') {
		return fmt.Errorf("%w: params must be an object", ErrBadFrame)
	}
	hasChannel, hasSub := false, false
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "channel":
			s, esc, err := d.str()
			if err != nil {
				return err
			}
			f.Channel, err = unescapeString(s, esc)
			hasChannel = true
			return err
		case "subscriptionId":
			s, esc, err := d.str()
			if err != nil {
				return err
			}
			f.SubscriptionID, err = unescapeString(s, esc)
			hasSub = true
			return err
		case "messageId":
			n, err := d.posInt()
			f.MessageID, f.hasMessageID = n, true
			return err
		case "data":
			s, esc, err := d.str()
			f.rawData, f.dataEscaped, f.hasData = s, esc, true
			return err
		case "final":
			v, err := d.boolean()
			f.Final = v
			return err
		default:
			return d.skip()
		}
	})
	if err != nil {
		if errors.Is(err, ErrBadJSON) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	switch {
	case !hasChannel:
		return fmt.Errorf("%w: channel missing", ErrBadFrame)
	case !hasSub:
		return fmt.Errorf("%w: subscriptionId missing", ErrBadFrame)
	case !f.hasMessageID:
		return fmt.Errorf("%w: messageId missing", ErrBadFrame)
	case !f.hasData:
		return fmt.Errorf("%w: data missing", ErrBadFrame)
	}
	return nil
}

// AppendData appends the decoded data string of f to dst and returns it
// with the payload size in UTF-16 bytes. It rejects invalid UTF-8, bad
// escapes and lone surrogates (a sender that split a surrogate pair across
// frames produces one; receivers reject such fragments rather than repair
// them).
func (f *Frame) AppendData(dst []byte) ([]byte, int64, error) {
	s := f.rawData
	if !f.dataEscaped {
		if !utf8.Valid(s) {
			return dst, 0, fmt.Errorf("%w: invalid UTF-8 in data", ErrBadFrame)
		}
		return append(dst, s...), utf16LenBytes(s), nil
	}
	start := len(dst)
	dst, err := appendUnescaped(dst, s)
	if err != nil {
		return dst[:start], 0, err
	}
	return dst, utf16LenBytes(dst[start:]), nil
}

// Data returns the decoded data string (a convenience for tests and slow
// paths; the receive path uses AppendData).
func (f *Frame) Data() (string, error) {
	b, _, err := f.AppendData(nil)
	return string(b), err
}

func unescapeString(s []byte, escaped bool) (string, error) {
	if !escaped {
		if !utf8.Valid(s) {
			return "", fmt.Errorf("%w: invalid UTF-8", ErrBadFrame)
		}
		return string(s), nil
	}
	b, err := appendUnescaped(nil, s)
	return string(b), err
}

// appendUnescaped decodes a JSON string body (between the quotes).
func appendUnescaped(dst, s []byte) ([]byte, error) {
	for i := 0; i < len(s); {
		// Copy the run up to the next backslash.
		j := i
		for j < len(s) && s[j] != '\\' {
			j++
		}
		if !utf8.Valid(s[i:j]) {
			return dst, fmt.Errorf("%w: invalid UTF-8", ErrBadFrame)
		}
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			break
		}
		if j+1 >= len(s) {
			return dst, fmt.Errorf("%w: truncated escape", ErrBadJSON)
		}
		switch c := s[j+1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
			i = j + 2
		case 'n':
			dst, i = append(dst, '\n'), j+2
		case 'r':
			dst, i = append(dst, '\r'), j+2
		case 't':
			dst, i = append(dst, '\t'), j+2
		case 'b':
			dst, i = append(dst, '\b'), j+2
		case 'f':
			dst, i = append(dst, '\f'), j+2
		case 'u':
			r, ok := hex4(s, j+2)
			if !ok {
				return dst, fmt.Errorf("%w: bad \\u escape", ErrBadJSON)
			}
			i = j + 6
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
					return dst, ErrSurrogate
				}
				r2, ok := hex4(s, i+2)
				if !ok {
					return dst, fmt.Errorf("%w: bad \\u escape", ErrBadJSON)
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return dst, ErrSurrogate
				}
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, fmt.Errorf("%w: bad escape \\%c", ErrBadJSON, c)
		}
	}
	return dst, nil
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// decoder is a minimal JSON scanner: it validates structure and finds
// values without building them.
type decoder struct {
	b     []byte
	i     int
	depth int
}

const maxDepth = 64

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) consume(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object iterates the members of an object whose '{' was consumed.
func (d *decoder) object(member func(key []byte) error) error {
	d.ws()
	if d.consume('}') {
		return nil
	}
	for {
		d.ws()
		key, esc, err := d.str()
		if err != nil {
			return err
		}
		if esc {
			// Keys we act on never need escapes; an escaped key is
			// still valid JSON and is skipped.
			key = nil
		}
		d.ws()
		if !d.consume(':') {
			return fmt.Errorf("%w: expected ':' at %d", ErrBadJSON, d.i)
		}
		d.ws()
		if err := member(key); err != nil {
			return err
		}
		d.ws()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return nil
		}
		return fmt.Errorf("%w: expected ',' or '}' at %d", ErrBadJSON, d.i)
	}
}

// str scans a string at d.i and returns its body (still escaped) and
// whether it contains escapes. Control characters are rejected.
func (d *decoder) str() ([]byte, bool, error) {
	if !d.consume('"') {
		return nil, false, fmt.Errorf("%w: expected string at %d", ErrBadJSON, d.i)
	}
	start := d.i
	escaped := false
	b := d.b
	for i := start; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			d.i = i + 1
			return b[start:i], escaped, nil
		}
		if c == '\\' {
			escaped = true
			i++
			continue
		}
		if c < 0x20 {
			return nil, false, fmt.Errorf("%w: control character in string", ErrBadJSON)
		}
	}
	return nil, false, fmt.Errorf("%w: unterminated string", ErrBadJSON)
}

func (d *decoder) boolean() (bool, error) {
	if d.lit("true") {
		return true, nil
	}
	if d.lit("false") {
		return false, nil
	}
	return false, errors.New("final must be a boolean")
}

func (d *decoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// posInt reads a JSON number that must be a positive safe integer.
func (d *decoder) posInt() (int64, error) {
	start := d.i
	if err := d.number(); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil || n <= 0 || n > MaxSafeInteger {
		return 0, errNumberForm
	}
	return n, nil
}

func (d *decoder) number() error {
	start := d.i
	d.consume('-')
	digits := 0
	for d.i < len(d.b) && (d.b[d.i] >= '0' && d.b[d.i] <= '9') {
		d.i++
		digits++
	}
	if digits == 0 {
		return fmt.Errorf("%w: bad number at %d", ErrBadJSON, start)
	}
	if d.consume('.') {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		if n == 0 {
			return fmt.Errorf("%w: bad number at %d", ErrBadJSON, start)
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if !d.consume('+') {
			d.consume('-')
		}
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		if n == 0 {
			return fmt.Errorf("%w: bad number at %d", ErrBadJSON, start)
		}
	}
	return nil
}

// skip scans over any JSON value.
func (d *decoder) skip() error {
	if d.i >= len(d.b) {
		return fmt.Errorf("%w: unexpected end", ErrBadJSON)
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, _, err := d.str()
		return err
	case c == '{' || c == '[':
		d.depth++
		if d.depth > maxDepth {
			return fmt.Errorf("%w: nesting too deep", ErrBadJSON)
		}
		defer func() { d.depth-- }()
		d.i++
		if c == '{' {
			return d.object(func([]byte) error { return d.skip() })
		}
		d.ws()
		if d.consume(']') {
			return nil
		}
		for {
			d.ws()
			if err := d.skip(); err != nil {
				return err
			}
			d.ws()
			if d.consume(',') {
				continue
			}
			if d.consume(']') {
				return nil
			}
			return fmt.Errorf("%w: expected ',' or ']' at %d", ErrBadJSON, d.i)
		}
	case c == 't':
		if d.lit("true") {
			return nil
		}
	case c == 'f':
		if d.lit("false") {
			return nil
		}
	case c == 'n':
		if d.lit("null") {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return fmt.Errorf("%w: unexpected character at %d", ErrBadJSON, d.i)
}

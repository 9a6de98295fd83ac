package flow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
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
	dataASCII      bool   // rawData is all ASCII (so valid UTF-8)
	hasData        bool
	hasMessageID   bool
	ascii          bool // the whole frame text is ASCII (see Size)
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
	err := decodeFrame(b, f)
	if err != nil {
		// The ids may be left from an earlier frame (they are kept to
		// avoid allocating): an error must never name a subscription the
		// message did not.
		f.Channel, f.SubscriptionID = "", ""
	}
	return err
}

func decodeFrame(b []byte, f *Frame) error {
	// Keep the previous ids: a Frame reused for the same subscription
	// then decodes without allocating (see unescapeInto).
	channel, sub := f.Channel, f.SubscriptionID
	*f = Frame{Channel: channel, SubscriptionID: sub}
	d := decoder{b: b}
	d.ws()
	if !d.consume('{') {
		return fmt.Errorf("%w: expected object", ErrBadJSON)
	}
	var version []byte
	var params []byte
	isFrame := false
	hasID := false
	parsed := false
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "jsonrpc":
			if !d.atString() {
				// Valid JSON of the wrong type: not JSON-RPC 2.0.
				version = nil
				return d.skip()
			}
			s, _, err := d.str()
			version = s
			return err
		case "method":
			if !d.atString() {
				// Not a method name, so not a frame: the caller's
				// ordinary decoder reports the invalid request.
				isFrame = false
				return d.skip()
			}
			s, _, err := d.str()
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
	f.ascii = !d.nonASCII
	if !isFrame || hasID {
		return ErrNotFrame // often a credit: not worth a formatted error
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
			if !d.atString() {
				return errors.New("channel must be a string")
			}
			s, esc, err := d.str()
			if err != nil {
				return err
			}
			hasChannel = true
			return unescapeInto(&f.Channel, s, esc)
		case "subscriptionId":
			if !d.atString() {
				return errors.New("subscriptionId must be a string")
			}
			s, esc, err := d.str()
			if err != nil {
				return err
			}
			hasSub = true
			return unescapeInto(&f.SubscriptionID, s, esc)
		case "messageId":
			n, err := d.posInt()
			f.MessageID, f.hasMessageID = n, true
			return err
		case "data":
			if !d.atString() {
				return errors.New("data must be a string")
			}
			s, esc, err := d.str()
			f.rawData, f.dataEscaped, f.dataASCII, f.hasData = s, esc, d.ascii, true
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
		// Keep the cause too (ErrSurrogate for a lone surrogate in an id).
		return fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	if !hasChannel {
		f.Channel = ""
	}
	if !hasSub {
		f.SubscriptionID = ""
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

// Size returns the size in UTF-16 bytes of raw, the text f was decoded
// from (a frame's size under maximumFrameBytes), without scanning it
// again when the decoder saw it was all ASCII.
func (f *Frame) Size(raw []byte) int64 {
	if f.ascii {
		return 2 * int64(len(raw))
	}
	return UTF16Len(unsafe.String(unsafe.SliceData(raw), len(raw)))
}

// AppendData appends the decoded data string of f to dst and returns it
// with the payload size in UTF-16 bytes. It rejects invalid UTF-8, bad
// escapes and lone surrogates (a sender that split a surrogate pair across
// frames produces one; receivers reject such fragments rather than repair
// them).
func (f *Frame) AppendData(dst []byte) ([]byte, int64, error) {
	s := f.rawData
	if !f.dataEscaped {
		if f.dataASCII {
			return append(dst, s...), 2 * int64(len(s)), nil
		}
		n, ok := validUTF16Len(s)
		if !ok {
			return dst, 0, fmt.Errorf("%w: invalid UTF-8 in data", ErrBadFrame)
		}
		return append(dst, s...), n, nil
	}
	start := len(dst)
	unescape := appendUnescaped
	if f.dataASCII {
		unescape = appendUnescapedASCII
	}
	dst, n, err := unescape(dst, s)
	if err != nil {
		return dst[:start], 0, err
	}
	return dst, n, nil
}

// Data returns the decoded data string (a convenience for tests and slow
// paths; the receive path uses AppendData).
func (f *Frame) Data() (string, error) {
	b, _, err := f.AppendData(nil)
	return string(b), err
}

// unescapeInto sets *dst to the decoded string body s, keeping the old
// string (no allocation) when it is equal.
func unescapeInto(dst *string, s []byte, escaped bool) error {
	if !escaped {
		if !utf8.Valid(s) {
			return fmt.Errorf("%w: invalid UTF-8", ErrBadFrame)
		}
		if *dst != string(s) { // compares without allocating
			*dst = string(s)
		}
		return nil
	}
	b, _, err := appendUnescaped(nil, s)
	*dst = string(b)
	return err
}

// appendUnescaped decodes a JSON string body (between the quotes) onto
// dst and returns the decoded size in UTF-16 bytes, validating UTF-8 and
// surrogate pairs in the same pass.
func appendUnescaped(dst, s []byte) ([]byte, int64, error) {
	var n int64
	run := 0 // start of the bytes not yet copied
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, 0, fmt.Errorf("%w: invalid UTF-8", ErrBadFrame)
			}
			n += utf16Width(r)
			i += size
			continue
		}
		if c != '\\' {
			// Skip 8 plain ASCII bytes at a time.
			if i+8 <= len(s) {
				x := binary.LittleEndian.Uint64(s[i:])
				b := x ^ (lsb * '\\')
				if ((b-lsb)&^b|x)&msb == 0 {
					n += 16
					i += 8
					continue
				}
			}
			n += 2
			i++
			continue
		}
		dst = append(dst, s[run:i]...)
		var used int
		var err error
		if dst, used, n, err = appendEscape(dst, s[i:], n); err != nil {
			return dst, 0, err
		}
		i += used
		run = i
	}
	return append(dst, s[run:]...), n, nil
}

// appendUnescapedASCII is appendUnescaped for a body with no byte above
// 0x7f (the decoder saw that while scanning it): it copies the runs
// between escapes in bulk.
func appendUnescapedASCII(dst, s []byte) ([]byte, int64, error) {
	var n int64
	for {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...), n + 2*int64(len(s)), nil
		}
		dst = append(dst, s[:k]...)
		n += 2 * int64(k)
		var used int
		var err error
		if dst, used, n, err = appendEscape(dst, s[k:], n); err != nil {
			return dst, 0, err
		}
		s = s[k+used:]
	}
}

// appendEscape decodes the escape at the start of s (s[0] is '\\'), a
// surrogate pair as one, onto dst, and returns the bytes of s it used and
// n plus its size in UTF-16 bytes.
func appendEscape(dst, s []byte, n int64) ([]byte, int, int64, error) {
	if len(s) < 2 {
		return dst, 0, 0, fmt.Errorf("%w: truncated escape", ErrBadJSON)
	}
	switch e := s[1]; e {
	case '"', '\\', '/':
		return append(dst, e), 2, n + 2, nil
	case 'n':
		return append(dst, '\n'), 2, n + 2, nil
	case 'r':
		return append(dst, '\r'), 2, n + 2, nil
	case 't':
		return append(dst, '\t'), 2, n + 2, nil
	case 'b':
		return append(dst, '\b'), 2, n + 2, nil
	case 'f':
		return append(dst, '\f'), 2, n + 2, nil
	case 'u':
		r, ok := hex4(s, 2)
		if !ok {
			return dst, 0, 0, fmt.Errorf("%w: bad \\u escape", ErrBadJSON)
		}
		if !utf16.IsSurrogate(r) {
			return utf8.AppendRune(dst, r), 6, n + 2, nil
		}
		if r >= 0xdc00 || len(s) < 12 || s[6] != '\\' || s[7] != 'u' {
			return dst, 0, 0, ErrSurrogate
		}
		r2, ok := hex4(s, 8)
		if !ok {
			return dst, 0, 0, fmt.Errorf("%w: bad \\u escape", ErrBadJSON)
		}
		r = utf16.DecodeRune(r, r2)
		if r == utf8.RuneError {
			return dst, 0, 0, ErrSurrogate
		}
		return utf8.AppendRune(dst, r), 12, n + 4, nil
	default:
		return dst, 0, 0, fmt.Errorf("%w: bad escape \\%c", ErrBadJSON, e)
	}
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
	ascii bool // the last string scanned by str was all ASCII
	// nonASCII: some string scanned by str was not (outside strings,
	// valid JSON is ASCII).
	nonASCII bool
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

// atString reports whether a string value starts at d.i. Fields of the
// wrong type are valid JSON: they are ErrBadFrame (or not a frame), not
// ErrBadJSON.
func (d *decoder) atString() bool { return d.i < len(d.b) && d.b[d.i] == '"' }

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
// whether it contains escapes. Control characters and malformed escapes
// are rejected.
func (d *decoder) str() ([]byte, bool, error) {
	if !d.consume('"') {
		return nil, false, fmt.Errorf("%w: expected string at %d", ErrBadJSON, d.i)
	}
	start := d.i
	escaped := false
	ascii := true
	b := d.b
	for i := start; i < len(b); i++ {
		var plain bool
		i, plain = stringEnd(b, i)
		ascii = ascii && plain
		if i >= len(b) {
			break
		}
		c := b[i]
		if c == '"' {
			d.i = i + 1
			d.ascii = ascii
			d.nonASCII = d.nonASCII || !ascii
			return b[start:i], escaped, nil
		}
		if c == '\\' {
			// Validate the escape's syntax here, so that everything
			// DecodeFrame accepts is valid JSON; surrogate pairing is
			// checked when the string is decoded.
			escaped = true
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(b, i+1); !ok {
					return nil, false, fmt.Errorf("%w: bad \\u escape", ErrBadJSON)
				}
				i += 4
			default:
				return nil, false, fmt.Errorf("%w: bad escape \\%c", ErrBadJSON, b[i])
			}
			continue
		}
		return nil, false, fmt.Errorf("%w: control character in string", ErrBadJSON)
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
	if d.i >= len(d.b) || (d.b[d.i] != '-' && (d.b[d.i] < '0' || d.b[d.i] > '9')) {
		return 0, errNumberForm
	}
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
	if digits == 0 || (digits > 1 && d.b[d.i-digits] == '0') {
		// RFC 8259: no leading zeros.
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

// AppendUnescaped appends the decoded form of a JSON string body (the text
// between the quotes) to dst and returns it with the decoded size in UTF-16
// bytes. It rejects invalid UTF-8, bad escapes and lone surrogates, like
// AppendData. Clients use it to read a large string field without
// encoding/json.
func AppendUnescaped(dst, body []byte) ([]byte, int64, error) {
	return appendUnescaped(dst, body)
}

// ErrNotNotification means a well-formed JSON text is not a JSON-RPC 2.0
// notification: it has an id, no string method, or jsonrpc is not "2.0".
var ErrNotNotification = errors.New("flow: not a JSON-RPC 2.0 notification")

// DecodeNotification splits a client→host logical message (a JSON-RPC
// notification) into its method and params without reflection, in one
// scan that validates the JSON structure (strings' UTF-8 is left to the
// kind's own decoding of params). params aliases b (nil when absent). It
// returns ErrBadJSON (wrapped) for malformed JSON and ErrNotNotification
// (wrapped) for a request, a response, or a missing method.
func DecodeNotification(b []byte) (method string, params []byte, err error) {
	d := decoder{b: b}
	d.ws()
	if !d.consume('{') {
		return "", nil, fmt.Errorf("%w: expected object", ErrBadJSON)
	}
	var version, name []byte
	var escapedName, hasID, hasMethod bool
	err = d.object(func(key []byte) error {
		switch string(key) {
		case "jsonrpc":
			if !d.atString() {
				version = nil
				return d.skip()
			}
			s, _, err := d.str()
			version = s
			return err
		case "method":
			if !d.atString() {
				hasMethod = false
				return d.skip()
			}
			s, esc, err := d.str()
			name, escapedName, hasMethod = s, esc, true
			return err
		case "params":
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
		return "", nil, err
	}
	d.ws()
	if d.i != len(b) {
		return "", nil, fmt.Errorf("%w: trailing data", ErrBadJSON)
	}
	if bytes.IndexByte(version, '\\') >= 0 {
		if version, _, err = appendUnescaped(nil, version); err != nil {
			return "", nil, err
		}
	}
	if hasID || !hasMethod || len(name) == 0 || string(version) != "2.0" {
		return "", nil, ErrNotNotification
	}
	if escapedName {
		u, _, err := appendUnescaped(nil, name)
		if err != nil {
			return "", nil, err
		}
		name = u
	}
	return string(name), params, nil
}

package session

// recordings/list, recordings/read, recordings/index and
// recordings/keyframe (docs/protocol.md, "Recordings"): the page's player
// reads the terminal recordings of the daemon's record.Store over the
// viewer WebSocket. Any role may ask; a credential sees the recordings of
// the channels it reaches only, and an id it does not reach is answered
// as one that does not exist, so that ids cannot be probed.
//
// They run on the connection's run loop, like channels/create: each
// reads at most one bounded piece of a file (a read's bytes, an index, a
// keyframe's line).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/flow"
)

// ErrRecordingNotFound: no recording has the id, or it was evicted.
var ErrRecordingNotFound = errors.New("recording not found")

// RecordingInfo describes a recording (the Host's, from its
// record.Store).
type RecordingInfo struct {
	ID string
	// Key orders recordings: RecordingsPage is in descending Key order.
	// recordings/list's cursor is a Key (ValidRecordingCursor).
	Key      string
	Channel  string // the terminal's URI
	Started  time.Time
	Ended    time.Time // zero while Live
	Live     bool
	Bytes    int64 // of the .cast
	Duration float64
	Rows     int
	Cols     int
	Title    string
	Input    bool
}

// RecordingKeyframe is a keyframe of a recording's index: Screen is left
// out by RecordingsIndex, which gives its size in Bytes.
type RecordingKeyframe struct {
	Time   float64 `json:"time"`
	Offset int64   `json:"offset"`
	Rows   int     `json:"rows"`
	Cols   int     `json:"cols"`
	Screen string  `json:"screen,omitempty"`
	Bytes  int     `json:"bytes"`
}

// Audit is an audit event of a recording (docs/recording.md): Time is set
// by the recording.
type Audit struct {
	Time   float64 `json:"time"`
	Event  string  `json:"event"`
	Viewer string  `json:"viewer,omitempty"`
	Token  string  `json:"token,omitempty"`
	Role   string  `json:"role,omitempty"`
	Remote string  `json:"remote,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

// RecordingIndex is a recording's index without the keyframes' screens.
type RecordingIndex struct {
	Keyframes []RecordingKeyframe `json:"keyframes"`
	Audit     []Audit             `json:"audit"`
	Dropped   int64               `json:"dropped"`
	// DroppedAudit counts the audit events the recording could not write
	// (docs/recording.md).
	DroppedAudit int64 `json:"droppedAudit"`
}

// Bounds of recordings/read (docs/protocol.md, "Recordings").
const (
	defaultReadBytes = 256 << 10
	maxReadBytes     = 1 << 20
)

// maxReadLine bounds how far recordingEnd looks back for a line's end
// (the recorder writes event lines of at most 64 KiB).
const maxReadLine = 4 << 20

// recordingInfo is a recording as recordings/list answers it.
type recordingInfo struct {
	ID       string  `json:"id"`
	Channel  string  `json:"channel"`
	Started  string  `json:"started"`
	Ended    *string `json:"ended"`
	Live     bool    `json:"live"`
	Bytes    int64   `json:"bytes"`
	Duration float64 `json:"duration"`
	Rows     int     `json:"rows"`
	Cols     int     `json:"cols"`
	Title    string  `json:"title"`
	Input    bool    `json:"input"`
}

func toRecordingInfo(i RecordingInfo) recordingInfo {
	r := recordingInfo{ID: i.ID, Channel: i.Channel, Started: i.Started.UTC().Format(time.RFC3339), Live: i.Live, Bytes: i.Bytes,
		Duration: i.Duration, Rows: i.Rows, Cols: i.Cols, Title: i.Title, Input: i.Input}
	if !i.Live && !i.Ended.IsZero() {
		e := i.Ended.UTC().Format(time.RFC3339)
		r.Ended = &e
	}
	return r
}

// recordingNotFound answers an id that does not exist, was evicted, or
// that the credential does not reach: the same error for all three.
func recordingNotFound(id string) *RPCError {
	return rpcErr(flow.ErrCodeChannelNotFound, "recording not found: "+quoteClient(id))
}

// recording returns the Info of the recording id if the credential
// reaches its channel.
func (c *conn) recording(id string) (RecordingInfo, *RPCError) {
	if id == "" || len(id) > c.limits.MaxIDLength {
		return RecordingInfo{}, recordingNotFound(id)
	}
	info, err := c.srv.host.RecordingsInfo(id)
	if err != nil || !c.grant.Allows(info.Channel) {
		return RecordingInfo{}, recordingNotFound(id)
	}
	return info, nil
}

// messageLimit is the largest response a recordings method sends: the
// client's default message size (clientReceiveDefaults.maximumMessageBytes,
// in UTF-16 bytes as every AHP size), and at most half the connection's
// control lane, which holds responses (in UTF-8 bytes).
func (c *conn) messageLimit() (utf16, utf8 int64) {
	lane := min(4<<20, c.limits.MaxBufferedBytes/4)
	return c.limits.ClientReceiveDefaults.MaximumMessageBytes, lane / 2
}

// fits reports whether a response of b bytes is under the message limit.
func (c *conn) fits(b []byte) bool { return c.ratio(b) >= 1 }

// ratio returns the message limit over the size of b, in the measure
// where it is smallest (< 1: b does not fit).
func (c *conn) ratio(b []byte) float64 {
	l16, l8 := c.messageLimit()
	return min(float64(l8)/float64(len(b)), float64(l16)/float64(flow.UTF16Len(string(b))))
}

// respondFitted answers req with the largest answer that fits in the
// message limit. encode(n) writes the answer of at most n of its parts
// (recordings, lines' bytes, audit events, a screen's bytes: whole ones,
// so it may hold fewer) and says how many it holds; each try cuts n in
// proportion to the excess, as escaping makes a part's size known only
// once it is written, so a few tries do. An answer of fewer than least
// parts is not sent: tooLarge(parts) is, once least parts do not fit.
func (c *conn) respondFitted(req *request, n, least int, encode func(n int) (b []byte, parts int), tooLarge func(parts int) *RPCError) error {
	for {
		b, got := encode(n)
		if got >= least && c.fits(b) {
			if req.isNotification() {
				return nil
			}
			return c.queue(b)
		}
		if got <= least {
			return c.respondOr(req, tooLarge(got))
		}
		n = max(least, min(got-1, int(float64(got)*c.ratio(b)*0.95)))
	}
}

// Bounds of recordings/list (docs/protocol.md, "Recordings").
const (
	// DefaultListLimit is the page size when limit is left out, and
	// MaxListLimit the largest allowed.
	DefaultListLimit = 1000
	MaxListLimit     = 1000
	// MaxRecordingCursor bounds a cursor's length: a Key is 24 bytes
	// more than its recording's id, and an id is part of a file name (at
	// most 255 bytes).
	MaxRecordingCursor = 512
)

// cursorPattern is a recording's Key (pty/record's sortKey): the start
// (UTC, 20060102T150405Z), the "-N" of ids that started in the same
// second (at least 6 digits), and the id.
var cursorPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z [0-9]{6,} [A-Za-z0-9._-]+$`)

// ValidRecordingCursor reports whether s is a well-formed cursor of a
// recordings list (recordings/list's after, ListRecordings' page_token):
// the Key of a recording, which need not exist any more.
func ValidRecordingCursor(s string) bool {
	return len(s) <= MaxRecordingCursor && cursorPattern.MatchString(s)
}

// listResult is recordings/list's answer: Next is the cursor of the next
// page, nil after the last.
type listResult struct {
	Recordings []recordingInfo `json:"recordings"`
	Next       *string         `json:"next"`
}

func (c *conn) recordingsList(req *request) error {
	var p struct {
		Channel string  `json:"channel"`
		Limit   *int    `json:"limit"`
		After   *string `json:"after"`
	}
	if len(req.Params) > 0 {
		if e := decodeParams(req, &p); e != nil {
			return c.respondOr(req, e)
		}
	}
	if e := c.tooLong(subRef{Channel: p.Channel}); e != nil {
		return c.respondOr(req, e)
	}
	if p.Channel != "" && !c.grant.Allows(p.Channel) {
		return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: the credential does not reach this channel"))
	}
	limit := DefaultListLimit
	if p.Limit != nil {
		if *p.Limit < 1 || *p.Limit > MaxListLimit {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("limit: must be between 1 and %d, got %d", MaxListLimit, *p.Limit)))
		}
		limit = *p.Limit
	}
	if p.After != nil && !ValidRecordingCursor(*p.After) {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "after: not a cursor of recordings/list (give the next of the previous page, or leave it out for the first)"))
	}
	// The page: the newest recordings the credential reaches that are
	// older than the cursor, and whether more follow. A cursor is a Key,
	// so it holds its place whether or not its recording was evicted
	// since. The store makes a page in one pass over its recordings.
	var page []RecordingInfo
	more := false
	if p.Channel == "" || strings.HasPrefix(p.Channel, registry.SchemeTerminal) {
		after := ""
		if p.After != nil {
			after = *p.After
		}
		var keep func(string) bool // a credential over all channels keeps all
		if len(c.grant.Channels) > 0 {
			keep = c.grant.Allows
		}
		page, more = c.srv.host.RecordingsPage(p.Channel, after, limit, keep)
	}
	// A page that does not fit in the message limit is shortened; only
	// one recording that does not fit alone is refused (an empty page is
	// an answer).
	return c.respondFitted(req, len(page), min(1, len(page)), func(n int) ([]byte, int) {
		res := listResult{Recordings: make([]recordingInfo, n)}
		for k, i := range page[:n] {
			res.Recordings[k] = toRecordingInfo(i)
		}
		if (more || n < len(page)) && n > 0 {
			next := page[n-1].Key
			res.Next = &next
		}
		return encodeResponse(req.ID, res, nil), n
	}, func(n int) *RPCError {
		l16, _ := c.messageLimit()
		what := "the list"
		if n == 1 {
			what = "recording " + quoteClient(page[0].ID)
		}
		return rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: %s is larger than the message limit (%d UTF-16 bytes, clientReceiveDefaults.maximumMessageBytes)", what, l16))
	})
}

// readResult is recordings/read's answer. Data is whole lines of the
// .cast file from Offset to NextOffset.
type readResult struct {
	Data       string `json:"data"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"nextOffset"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
	Live       bool   `json:"live"`
}

func (c *conn) recordingsRead(req *request) error {
	var p struct {
		ID       string `json:"id"`
		Offset   *int64 `json:"offset"`
		MaxBytes *int64 `json:"maxBytes"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	info, e := c.recording(p.ID)
	if e != nil {
		return c.respondOr(req, e)
	}
	want := int64(defaultReadBytes)
	if p.MaxBytes != nil {
		if *p.MaxBytes < 1 || *p.MaxBytes > maxReadBytes {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("maxBytes: must be between 1 and %d, got %d", maxReadBytes, *p.MaxBytes)))
		}
		want = *p.MaxBytes
	}
	off := int64(0)
	if p.Offset != nil {
		off = *p.Offset
	}
	f, info, err := c.srv.host.RecordingsOpen(info.ID)
	if err != nil {
		return c.respondOr(req, recordingNotFound(p.ID))
	}
	defer f.Close()
	size, err := RecordingEnd(f)
	if err != nil {
		c.log.Warn("recording unreadable", "conn", c.id, "recording", info.ID, "err", err)
		return c.respondOr(req, rpcErr(flow.ErrCodeInternal, "recording unreadable"))
	}
	if off < 0 || off > size {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("offset: must be between 0 and the size, %d, got %d", size, off)))
	}
	data, err := c.readLines(f, off, size, want)
	if err != nil {
		var ee *RPCError
		if errors.As(err, &ee) {
			return c.respondOr(req, ee)
		}
		c.log.Warn("recording unreadable", "conn", c.id, "recording", info.ID, "err", err)
		return c.respondOr(req, rpcErr(flow.ErrCodeInternal, "recording unreadable"))
	}
	// Whole lines that fit: shortened at an earlier line's end when the
	// response would pass the message limit (escaping may grow it). A
	// read at the end for now (no data) is an answer too.
	least := min(1, len(data))
	return c.respondFitted(req, len(data), least, func(n int) ([]byte, int) {
		k := len(data)
		if n < len(data) {
			k = bytes.LastIndexByte(data[:n], '\n') + 1
		}
		res := readResult{Data: string(data[:k]), Offset: off, NextOffset: off + int64(k), Size: size, Live: info.Live}
		res.EOF = res.NextOffset == size && !info.Live
		return encodeReadResponse(req.ID, res), k
	}, func(int) *RPCError {
		l16, _ := c.messageLimit()
		return rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: the line at offset %d is larger than the message limit (%d UTF-16 bytes)", off, l16))
	})
}

// readLines reads whole lines of f from off, up to want bytes and never
// past end: it cuts at the last "\n" within want bytes, or, when the first
// line is longer than want, reads that line whole if it fits in the
// message limit.
func (c *conn) readLines(f io.ReadSeeker, off, end, want int64) ([]byte, error) {
	if off == end {
		return []byte{}, nil
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	n := min(want, end-off)
	buf := make([]byte, n)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return buf[:i+1], nil
	}
	// One line longer than want: read on to its end, as far as the
	// message limit could carry.
	_, l8 := c.messageLimit()
	limit := min(l8, end-off)
	for int64(len(buf)) < limit {
		more := make([]byte, min(64<<10, limit-int64(len(buf))))
		k, err := io.ReadFull(f, more)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		if i := bytes.IndexByte(more[:k], '\n'); i >= 0 {
			return append(buf, more[:i+1]...), nil
		}
		buf = append(buf, more[:k]...)
		if k == 0 {
			break
		}
	}
	l16, _ := c.messageLimit()
	return nil, rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: the line at offset %d is larger than the message limit (%d UTF-16 bytes)", off, l16))
}

// encodeReadResponse writes recordings/read's response with the data
// string escaped as AHP strings are (flow.AppendJSONString: no HTML
// escapes, which json.Marshal would add to every "<").
func encodeReadResponse(id []byte, r readResult) []byte {
	if len(id) == 0 {
		id = []byte("null")
	}
	b := make([]byte, 0, len(r.Data)+len(r.Data)/8+256)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"data":`...)
	b = flow.AppendJSONString(b, r.Data)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"nextOffset":`...)
	b = strconv.AppendInt(b, r.NextOffset, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"eof":`...)
	b = strconv.AppendBool(b, r.EOF)
	b = append(b, `,"live":`...)
	b = strconv.AppendBool(b, r.Live)
	return append(b, "}}"...)
}

// RecordingEnd returns where a read of a .cast stops: after its last
// complete line (a recording being written may end in the middle of one;
// one that ended ends with a line's end, so this is its size).
func RecordingEnd(f io.ReadSeeker) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return 0, err
		}
		n, err := io.ReadFull(f, buf[:end-start])
		if err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		if size-start > maxReadLine {
			return 0, fmt.Errorf("no line end in the last %d bytes", size-start)
		}
		end = start
	}
	return 0, nil
}

// indexResult is recordings/index's answer: the keyframes, and the
// audit events from AuditFrom (their number in the index) that fit in a
// message; AuditNext is the number to ask from for the rest, nil when
// Audit ends the list.
type indexResult struct {
	Keyframes    []RecordingKeyframe `json:"keyframes"`
	Audit        []Audit             `json:"audit"`
	AuditFrom    int                 `json:"auditFrom"`
	AuditNext    *int                `json:"auditNext"`
	Dropped      int64               `json:"dropped"`
	DroppedAudit int64               `json:"droppedAudit"`
}

// minAuditJSON is the least an audit event takes in JSON,
// {"time":0,"event":"x"} and a comma.
const minAuditJSON = 23

func (c *conn) recordingsIndex(req *request) error {
	var p struct {
		ID        string `json:"id"`
		AuditFrom *int   `json:"auditFrom"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	info, e := c.recording(p.ID)
	if e != nil {
		return c.respondOr(req, e)
	}
	idx, err := c.srv.host.RecordingsIndex(info.ID)
	if err != nil {
		if errors.Is(err, ErrRecordingNotFound) {
			return c.respondOr(req, recordingNotFound(p.ID))
		}
		c.log.Warn("recording index unreadable", "conn", c.id, "recording", info.ID, "err", err)
		return c.respondOr(req, rpcErr(flow.ErrCodeInternal, "recording index unreadable"))
	}
	from := 0
	if p.AuditFrom != nil {
		from = *p.AuditFrom
		if from < 0 || from > len(idx.Audit) {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("auditFrom: must be between 0 and the number of audit events, %d, got %d", len(idx.Audit), from)))
		}
	}
	res := indexResult{Keyframes: idx.Keyframes, AuditFrom: from, Dropped: idx.Dropped, DroppedAudit: idx.DroppedAudit}
	if res.Keyframes == nil {
		res.Keyframes = []RecordingKeyframe{}
	}
	for i := range res.Keyframes {
		res.Keyframes[i].Screen = ""
	}
	// The audit events from from that fit: each try cuts in proportion
	// to the excess. The keyframes (one per MiB of output or minute of
	// it) always come whole.
	audit := idx.Audit[from:]
	l16, l8 := c.messageLimit()
	if most := int(min(l8, l16/2) / minAuditJSON); len(audit) > most {
		audit = audit[:most] // no more could fit: none is encoded
	}
	return c.respondFitted(req, len(audit), 0, func(n int) ([]byte, int) {
		res.Audit, res.AuditNext = audit[:n], nil
		if res.Audit == nil {
			res.Audit = []Audit{}
		}
		if end := from + n; end < len(idx.Audit) {
			res.AuditNext = &end
		}
		return encodeResponse(req.ID, res, nil), n
	}, func(int) *RPCError {
		return rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: the index's keyframes are larger than the message limit (%d UTF-16 bytes, clientReceiveDefaults.maximumMessageBytes)", l16))
	})
}

// keyframeResult is recordings/keyframe's answer: Screen is the
// keyframe's screen text from UTF-8 byte From; Next is where the rest
// starts, nil when Screen ends the screen. Bytes is the whole screen's
// size.
type keyframeResult struct {
	Time   float64
	Offset int64
	Rows   int
	Cols   int
	Screen string
	From   int
	Next   int // < 0: none
	Bytes  int
}

func (c *conn) recordingsKeyframe(req *request) error {
	var p struct {
		ID   string `json:"id"`
		N    *int   `json:"n"`
		From *int64 `json:"from"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	info, e := c.recording(p.ID)
	if e != nil {
		return c.respondOr(req, e)
	}
	if p.N == nil || *p.N < 0 {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "n: required, the keyframe's number from 0 (recordings/index lists them)"))
	}
	k, err := c.srv.host.RecordingsKeyframe(info.ID, *p.N)
	if err != nil {
		if errors.Is(err, ErrRecordingNotFound) {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("n: %s has no keyframe %d (recordings/index lists them)", quoteClient(p.ID), *p.N)))
		}
		c.log.Warn("recording index unreadable", "conn", c.id, "recording", info.ID, "err", err)
		return c.respondOr(req, rpcErr(flow.ErrCodeInternal, "recording index unreadable"))
	}
	if !utf8.ValidString(k.Screen) {
		return c.respondOr(req, rpcErr(flow.ErrCodeInternal, "recording index unreadable"))
	}
	from := 0
	if p.From != nil {
		if *p.From < 0 || *p.From > int64(len(k.Screen)) || !screenBoundary(k.Screen, int(*p.From)) {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, fmt.Sprintf("from: must be a character's first byte in the screen's %d bytes (0, or the next of the previous piece), got %d", len(k.Screen), *p.From)))
		}
		from = int(*p.From)
	}
	// The piece: as much of the screen from from as fits in the message
	// limit, cut at a character's boundary. Each try cuts in proportion
	// to the excess (escaping grows a screen's control characters six
	// times), so a few tries do.
	l16, l8 := c.messageLimit()
	rest := len(k.Screen) - from
	return c.respondFitted(req, int(min(int64(rest), l8)), min(1, rest), func(n int) ([]byte, int) {
		end := screenCut(k.Screen, from, n)
		res := keyframeResult{Time: k.Time, Offset: k.Offset, Rows: k.Rows, Cols: k.Cols, Screen: k.Screen[from:end], From: from, Next: -1, Bytes: len(k.Screen)}
		if end < len(k.Screen) {
			res.Next = end
		}
		return encodeKeyframeResponse(req.ID, res), end - from
	}, func(int) *RPCError {
		return rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: no piece of keyframe %d from byte %d fits in the message limit (%d UTF-16 bytes)", *p.N, from, l16))
	})
}

// screenBoundary reports whether i is where a character of s starts, or
// s's end.
func screenBoundary(s string, i int) bool {
	return i >= 0 && i <= len(s) && (i == len(s) || utf8.RuneStart(s[i]))
}

// screenCut returns the end of the longest piece of s from from (a
// character's start) of at most n bytes that ends at a character's
// boundary: from itself when n is shorter than the first character.
func screenCut(s string, from, n int) int {
	end := min(len(s), from+max(0, n))
	for end > from && !screenBoundary(s, end) {
		end--
	}
	return end
}

// encodeKeyframeResponse writes recordings/keyframe's response with the
// screen escaped as AHP strings are (flow.AppendJSONString: no HTML
// escapes).
func encodeKeyframeResponse(id []byte, r keyframeResult) []byte {
	if len(id) == 0 {
		id = []byte("null")
	}
	b := make([]byte, 0, len(r.Screen)+len(r.Screen)/4+256)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"time":`...)
	b = strconv.AppendFloat(b, r.Time, 'g', -1, 64)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, int64(r.Rows), 10)
	b = append(b, `,"cols":`...)
	b = strconv.AppendInt(b, int64(r.Cols), 10)
	b = append(b, `,"screen":`...)
	b = flow.AppendJSONString(b, r.Screen)
	b = append(b, `,"from":`...)
	b = strconv.AppendInt(b, int64(r.From), 10)
	b = append(b, `,"next":`...)
	if r.Next < 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(r.Next), 10)
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, int64(r.Bytes), 10)
	return append(b, "}}"...)
}

// auditRole is the role an audit event names: admin for the admin token.
func (c *conn) auditRole() string {
	if c.grant.Admin {
		return "admin"
	}
	return c.grant.Role.String()
}

// audit adds event to the recording of s's terminal, if it records
// (docs/recording.md, "Audit"): who, with which token (its id, never the
// secret), role and address.
func (c *conn) audit(s *subscription, event, detail string) string {
	if s.ch.Type != "terminal" {
		return ""
	}
	return c.srv.host.RecordAudit(s.ch.URI, Audit{Event: event, Viewer: c.id, Token: c.grant.ID, Role: c.auditRole(), Remote: c.remote, Detail: detail})
}

// auditInput counts the bytes of input in params (terminal/input's) from
// s's viewer while the terminal records and, at the viewer's first
// keystroke into each recording, records an "input" audit event and
// publishes viewer.input.
func (c *conn) auditInput(s *subscription, params []byte) {
	if c.grant.Role != auth.RoleControl {
		return // refused by the terminal: not input
	}
	id := c.srv.host.RecordingOf(s.ch.URI)
	if id == "" {
		return
	}
	var p struct {
		Data string `json:"data"`
	}
	if json.Unmarshal(params, &p) == nil {
		s.inputBytes += int64(len(p.Data))
	}
	if id == s.inputAudited {
		return
	}
	s.inputAudited = id
	c.audit(s, "input", "")
	token := c.grant.ID
	if token == "" {
		token = "admin"
	}
	c.srv.events.Publish(events.Event{Kind: "viewer.input", Channel: s.ch.URI, Viewer: c.id,
		Detail: fmt.Sprintf("token %s, role %s, from %s, recording %s", token, c.auditRole(), c.remote, id)})
}

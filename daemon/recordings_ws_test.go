package daemon_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty/record"
)

// fakeRecording writes a finished recording of channel id into the
// daemon's store: lines "line N" of output, and a keyframe at the start
// whose screen is screen.
func fakeRecording(t *testing.T, h *harness, id string, lines int, screen string) record.Info {
	t.Helper()
	st := h.srv.Recordings()
	r, err := st.Start(record.Params{Channel: id, Rows: 24, Cols: 80, Title: id, Term: "xterm-256color", Mode: record.Output,
		Snapshot: func() (int, int, string) { return 24, 80, screen }})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for i := range lines {
		r.Output(at.Add(time.Duration(i)*time.Millisecond), "line "+strings.Repeat("<\"\\>", i%7)+"é "+itoa(i)+"\r\n")
	}
	rid := r.ID()
	r.Stop("test done")
	info, err := st.Info(rid)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

type recList struct {
	Recordings []struct {
		ID      string  `json:"id"`
		Channel string  `json:"channel"`
		Ended   *string `json:"ended"`
		Live    bool    `json:"live"`
		Bytes   int64   `json:"bytes"`
		Rows    int     `json:"rows"`
		Cols    int     `json:"cols"`
	} `json:"recordings"`
}

type recRead struct {
	Data       string `json:"data"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"nextOffset"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
	Live       bool   `json:"live"`
}

// TestRecordingsRPCAccess: the recordings/* methods over a real WebSocket
// with control, scoped view and no-access tokens: a token sees and reads
// the recordings of the channels it reaches only, and a recording it does
// not reach is answered exactly as one that does not exist.
func TestRecordingsRPCAccess(t *testing.T) {
	h := start(t, false, nil)
	a := fakeRecording(t, h, "a", 50, "\x1b[Hscreen of a")
	b := fakeRecording(t, h, "b", 5, "screen of b")
	ctx := ctxT(t)
	control, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleControl})
	viewA, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/a"}, Role: auth.RoleView})
	none, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/c"}, Role: auth.RoleControl})

	list := func(token string, params map[string]any) (ids []string, err error) {
		var l recList
		err = h.dial(token).Call(ctx, "recordings/list", params, &l)
		for _, r := range l.Recordings {
			ids = append(ids, r.ID)
		}
		return ids, err
	}
	for _, tc := range []struct {
		name, token string
		params      map[string]any
		want        []string
		code        int
	}{
		{"control sees all", control, map[string]any{}, []string{b.ID, a.ID}, 0}, // newest first
		{"control, one channel", control, map[string]any{"channel": "ahp-terminal:/a"}, []string{a.ID}, 0},
		{"admin, no params", adminToken, nil, []string{b.ID, a.ID}, 0},
		{"view of a", viewA, map[string]any{}, []string{a.ID}, 0},
		{"view of a asks for b", viewA, map[string]any{"channel": "ahp-terminal:/b"}, nil, flow.ErrCodeForbidden},
		{"no access", none, map[string]any{}, nil, 0},
	} {
		ids, err := list(tc.token, tc.params)
		if rpcCode(err) != tc.code || strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: recordings/list = %v, %v; want %v, code %d", tc.name, ids, err, tc.want, tc.code)
		}
	}

	// Reading: b through the view token of a fails as an unknown id does,
	// with the same code and message shape.
	cv := h.dial(viewA)
	var r recRead
	errB := cv.Call(ctx, "recordings/read", map[string]any{"id": b.ID, "offset": 0}, &r)
	unknown := "b-20991231T000000Z"
	errU := cv.Call(ctx, "recordings/read", map[string]any{"id": unknown, "offset": 0}, &r)
	if rpcCode(errB) != flow.ErrCodeChannelNotFound || rpcCode(errU) != flow.ErrCodeChannelNotFound ||
		strings.ReplaceAll(errB.Error(), b.ID, "ID") != strings.ReplaceAll(errU.Error(), unknown, "ID") {
		t.Fatalf("read of a forbidden id: %v; of an unknown id: %v; want the same -32002", errB, errU)
	}
	for _, m := range []string{"recordings/index", "recordings/keyframe"} {
		if err := cv.Call(ctx, m, map[string]any{"id": b.ID, "n": 0}, nil); rpcCode(err) != flow.ErrCodeChannelNotFound {
			t.Errorf("%s of a forbidden id: %v, want -32002", m, err)
		}
	}

	// The view token reads a whole, in pieces of whole lines, byte for
	// byte the .cast file.
	file, err := os.ReadFile(filepath.Join(h.srv.Recordings().Dir(), a.ID+".cast"))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for off, n := int64(0), 0; ; n++ {
		if err := cv.Call(ctx, "recordings/read", map[string]any{"id": a.ID, "offset": off, "maxBytes": 300}, &r); err != nil {
			t.Fatal(err)
		}
		if r.Offset != off || r.NextOffset != off+int64(len(r.Data)) || r.Size != int64(len(file)) || r.Live {
			t.Fatalf("read at %d: offset %d next %d size %d live %v; want offset %d, size %d", off, r.Offset, r.NextOffset, r.Size, r.Live, off, len(file))
		}
		if len(r.Data) > 300 && strings.Count(r.Data, "\n") != 1 || !strings.HasSuffix(r.Data, "\n") {
			t.Fatalf("read at %d: %d bytes, %q: want whole lines within maxBytes", off, len(r.Data), r.Data)
		}
		got = append(got, r.Data...)
		off = r.NextOffset
		if r.EOF {
			break
		}
		if n > 1000 {
			t.Fatal("no eof")
		}
	}
	if !bytes.Equal(got, file) {
		t.Fatalf("read %d bytes, file has %d: not the same bytes", len(got), len(file))
	}

	// The index and keyframe 0: the start's snapshot.
	var idx struct {
		Keyframes []struct {
			Time   float64 `json:"time"`
			Offset int64   `json:"offset"`
			Rows   int     `json:"rows"`
			Cols   int     `json:"cols"`
			Bytes  int     `json:"bytes"`
			Screen *string `json:"screen"`
		} `json:"keyframes"`
		Audit   []json.RawMessage `json:"audit"`
		Dropped *int64            `json:"dropped"`
	}
	if err := cv.Call(ctx, "recordings/index", map[string]any{"id": a.ID}, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Keyframes) < 1 || idx.Keyframes[0].Time != 0 || idx.Keyframes[0].Rows != 24 || idx.Keyframes[0].Cols != 80 ||
		idx.Keyframes[0].Bytes != len("\x1b[Hscreen of a") || idx.Keyframes[0].Screen != nil || idx.Audit == nil || idx.Dropped == nil {
		t.Fatalf("index = %+v, want keyframe 0 at time 0, 24x80, %d bytes, no screen; audit and dropped present", idx, len("\x1b[Hscreen of a"))
	}
	var kf struct {
		Offset int64  `json:"offset"`
		Screen string `json:"screen"`
	}
	if err := cv.Call(ctx, "recordings/keyframe", map[string]any{"id": a.ID, "n": 0}, &kf); err != nil || kf.Screen != "\x1b[Hscreen of a" {
		t.Fatalf("keyframe 0 = %+v, %v", kf, err)
	}
	if !bytes.HasPrefix(file[kf.Offset:], []byte("[")) || file[kf.Offset-1] != '\n' {
		t.Fatalf("keyframe 0's offset %d is not at an event line", kf.Offset)
	}
	for _, tc := range []struct {
		method string
		params map[string]any
		code   int
	}{
		{"recordings/keyframe", map[string]any{"id": a.ID, "n": 99}, flow.ErrCodeInvalidParams},
		{"recordings/keyframe", map[string]any{"id": a.ID}, flow.ErrCodeInvalidParams},
		{"recordings/read", map[string]any{"id": a.ID, "offset": int64(len(file)) + 1}, flow.ErrCodeInvalidParams},
		{"recordings/read", map[string]any{"id": a.ID, "offset": -1}, flow.ErrCodeInvalidParams},
		{"recordings/read", map[string]any{"id": a.ID, "maxBytes": 0}, flow.ErrCodeInvalidParams},
		{"recordings/read", map[string]any{"id": a.ID, "maxBytes": 1<<20 + 1}, flow.ErrCodeInvalidParams},
		{"recordings/read", map[string]any{"id": "../../admin.token"}, flow.ErrCodeChannelNotFound},
		{"recordings/index", map[string]any{"id": ""}, flow.ErrCodeChannelNotFound},
	} {
		if err := cv.Call(ctx, tc.method, tc.params, nil); rpcCode(err) != tc.code {
			t.Errorf("%s %v = %v, want %d", tc.method, tc.params, err, tc.code)
		}
	}
}

// TestRecordingsReadBound: a read never answers more than the
// connection's message limit (clientReceiveDefaults.maximumMessageBytes,
// UTF-16 bytes), whatever maxBytes asks, and still in whole lines; a
// line longer than the limit is refused with -32004.
func TestRecordingsReadBound(t *testing.T) {
	const limit = 64 << 10
	h := start(t, false, func(c *config.Config) {
		c.Limits = config.DefaultLimits()
		c.Limits.ClientReceiveDefaults.MaximumFrameBytes = 16 << 10
		c.Limits.ClientReceiveDefaults.MaximumMessageBytes = limit
	})
	a := fakeRecording(t, h, "big", 6000, "s")
	if a.Bytes < 4*limit {
		t.Fatalf("recording of %d bytes: too small for the test", a.Bytes)
	}
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ctx := ctxT(t)
	ws.SetReadLimit(16 << 20)
	write := func(s string) {
		if err := ws.Write(ctx, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"` + adminToken + `"}}`)
	readJSON(t, ws)
	var off int64
	for i := 0; ; i++ {
		write(`{"jsonrpc":"2.0","id":1,"method":"recordings/read","params":{"id":"` + a.ID + `","offset":` + itoa(int(off)) + `,"maxBytes":1048576}}`)
		msg := readJSON(t, ws)
		if n := flow.UTF16Len(msg); n > limit {
			t.Fatalf("response of %d UTF-16 bytes, limit %d", n, limit)
		}
		var res struct {
			Result recRead `json:"result"`
		}
		if err := json.Unmarshal([]byte(msg), &res); err != nil || !strings.HasSuffix(res.Result.Data, "\n") {
			t.Fatalf("read at %d: %v, data not whole lines: %.200s", off, err, msg)
		}
		off = res.Result.NextOffset
		if res.Result.EOF {
			break
		}
		if i == 0 && off > limit/2 {
			t.Fatalf("first read took %d bytes past the limit", off)
		}
	}
	if off != a.Bytes {
		t.Fatalf("read to %d, file has %d", off, a.Bytes)
	}
	// An event line of 32 KiB of text is 64 KiB of UTF-16 and more: past
	// the limit, refused, not cut.
	st := h.srv.Recordings()
	r, err := st.Start(record.Params{Channel: "long", Rows: 24, Cols: 80, Mode: record.Output, Snapshot: func() (int, int, string) { return 24, 80, "" }})
	if err != nil {
		t.Fatal(err)
	}
	r.Output(time.Now(), strings.Repeat("x", 40<<10))
	id := r.ID()
	r.Stop("test done")
	kf, err := st.Keyframe(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(`{"jsonrpc":"2.0","id":2,"method":"recordings/read","params":{"id":"` + id + `","offset":` + itoa(int(kf.Offset)) + `,"maxBytes":1024}}`)
	if msg := readJSON(t, ws); !strings.Contains(msg, `"code":-32004`) || !strings.Contains(msg, "message limit") {
		t.Fatalf("read of a line past the limit = %s, want -32004", msg)
	}
}

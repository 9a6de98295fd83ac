package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
	"github.com/ahp-dev/ahpd/pty/record"
)

// recPage is recordings/list's answer.
type recPage struct {
	Recordings []struct {
		ID      string `json:"id"`
		Channel string `json:"channel"`
	} `json:"recordings"`
	Next *string `json:"next"`
}

// fakeRecordingAt is fakeRecording of channel id started at at, with
// lines lines of output.
func fakeRecordingAt(t *testing.T, h *harness, id string, at time.Time, lines int) record.Info {
	t.Helper()
	st := h.srv.Recordings()
	r, err := st.Start(record.Params{Channel: id, Time: at, Rows: 24, Cols: 80, Title: id, Mode: record.Output,
		Snapshot: func() (int, int, string) { return 24, 80, "screen of " + id }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		r.Output(at.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("line %d of %s\r\n", i, id))
	}
	rid := r.ID()
	r.Stop("test done")
	info, err := st.Info(rid)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// oneLineCast is a recording of one line of output.
const oneLineCast = `{"version":2,"width":80,"height":24,"timestamp":1767225600}` + "\n" + `[0.5,"o","hi\r\n"]` + "\n"

// seedRecordings writes files (name → text) into the recordings
// directory of the daemon c configures, before it starts.
func seedRecordings(t *testing.T, c *config.Config, files map[string]string) {
	t.Helper()
	dir := filepath.Join(c.StateDir, daemon.RecordingsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(l []record.Info) []string {
	out := make([]string, len(l))
	for i, r := range l {
		out[i] = r.ID
	}
	return out
}

// TestRecordingsListPaging: recordings/list in pages of limit over a real
// WebSocket returns every recording exactly once, newest first, while
// recordings are added and the oldest evicted between pages; a view
// token's pages hold its channels' recordings only; a cursor holds its
// place after its recording is evicted; a bad limit or cursor is -32602.
func TestRecordingsListPaging(t *testing.T) {
	h := start(t, false, nil)
	st := h.srv.Recordings()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 20 {
		fakeRecordingAt(t, h, []string{"a", "b"}[i%2], t0.Add(time.Duration(i/2)*time.Second), 300)
	}
	for range 3 { // the same second as the oldest: ids a-START-2, -3, -4
		fakeRecordingAt(t, h, "a", t0, 300)
	}
	before := st.List("")
	if len(before) != 23 || !slices.Contains(ids(before), "a-20261201T100000Z-4") {
		t.Fatalf("store lists %v", ids(before))
	}
	ctx := ctxT(t)
	control, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleControl})
	viewA, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/a"}, Role: auth.RoleView})

	page := func(token string, params map[string]any) (recPage, error) {
		var p recPage
		err := h.dial(token).Call(ctx, "recordings/list", params, &p)
		return p, err
	}

	// Page 1, then a new recording and the 3 oldest evicted: the pages
	// that follow go on after page 1's last, without the new one and the
	// evicted ones.
	p, err := page(control, map[string]any{"limit": 4})
	if err != nil || p.Next == nil || len(p.Recordings) != 4 {
		t.Fatalf("page 1 = %+v, %v; want 4 and a next", p, err)
	}
	var got []string
	for _, r := range p.Recordings {
		got = append(got, r.ID)
	}
	fresh := fakeRecordingAt(t, h, "b", t0.Add(time.Hour), 300)
	var evicted int64
	for _, r := range before[len(before)-3:] {
		evicted += r.Bytes + r.IndexBytes
	}
	l := st.Limits()
	l.MaxBytes = 64 << 10
	l.MaxTotalBytes = st.Stats().Bytes - evicted
	if err := st.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if n := len(st.List("")); n != 24-3 {
		t.Fatalf("after eviction the store lists %d, want 21", n)
	}
	for n := 0; p.Next != nil; n++ {
		if n > 10 {
			t.Fatal("more than 10 pages")
		}
		if p, err = page(control, map[string]any{"limit": 4, "after": *p.Next}); err != nil {
			t.Fatal(err)
		}
		if len(p.Recordings) > 4 || len(p.Recordings) == 0 && p.Next != nil {
			t.Fatalf("page of %d with next %v", len(p.Recordings), p.Next)
		}
		for _, r := range p.Recordings {
			got = append(got, r.ID)
		}
	}
	want := ids(before[:len(before)-3])
	if !slices.Equal(got, want) || slices.Contains(got, fresh.ID) {
		t.Fatalf("pages listed\n%v\nwant\n%v", got, want)
	}

	// A view token of a: each page holds a's only, and together all of
	// a's, newest first.
	got = nil
	for after, n := "", 0; ; n++ {
		params := map[string]any{"limit": 3}
		if after != "" {
			params["after"] = after
		}
		p, err := page(viewA, params)
		if err != nil || n > 10 {
			t.Fatalf("view token's page %d: %v", n, err)
		}
		for _, r := range p.Recordings {
			if r.Channel != "ahp-terminal:/a" {
				t.Fatalf("view token of a got %s of %s", r.ID, r.Channel)
			}
			got = append(got, r.ID)
		}
		if p.Next == nil {
			break
		}
		after = *p.Next
	}
	if want := ids(st.List("a")); !slices.Equal(got, want) {
		t.Fatalf("view token's pages listed\n%v\nwant\n%v", got, want)
	}

	// A cursor whose recording and all older are evicted: an empty last
	// page, not an error.
	p, err = page(control, map[string]any{"limit": 20})
	if err != nil || p.Next == nil || len(p.Recordings) != 20 {
		t.Fatalf("page = %+v, %v", p, err)
	}
	cursor := *p.Next
	l.MaxTotalBytes = l.MaxBytes // keeps the newest few only
	if err := st.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Info(p.Recordings[19].ID); err == nil {
		t.Fatalf("%s not evicted", p.Recordings[19].ID)
	}
	if p, err = page(control, map[string]any{"after": cursor}); err != nil || len(p.Recordings) != 0 || p.Next != nil {
		t.Fatalf("page after an evicted recording = %+v, %v; want empty, next null", p, err)
	}

	for _, tc := range []struct {
		name   string
		token  string
		params map[string]any
		code   int
	}{
		{"limit 0", control, map[string]any{"limit": 0}, flow.ErrCodeInvalidParams},
		{"limit 1001", control, map[string]any{"limit": 1001}, flow.ErrCodeInvalidParams},
		{"limit -1", control, map[string]any{"limit": -1}, flow.ErrCodeInvalidParams},
		{"limit a string", control, map[string]any{"limit": "10"}, flow.ErrCodeInvalidParams},
		{"empty cursor", control, map[string]any{"after": ""}, flow.ErrCodeInvalidParams},
		{"an id for a cursor", control, map[string]any{"after": fresh.ID}, flow.ErrCodeInvalidParams},
		{"cursor a number", control, map[string]any{"after": 7}, flow.ErrCodeInvalidParams},
		{"long cursor", control, map[string]any{"after": "20261201T100000Z 000001 " + strings.Repeat("a", 600)}, flow.ErrCodeInvalidParams},
		{"view of a asks for b", viewA, map[string]any{"channel": "ahp-terminal:/b", "limit": 1}, flow.ErrCodeForbidden},
	} {
		if _, err := page(tc.token, tc.params); rpcCode(err) != tc.code {
			t.Errorf("%s: recordings/list %v = %v, want %d", tc.name, tc.params, err, tc.code)
		}
	}
}

// TestRecordingsListOfThousands: a directory of 5,000 recordings is
// listed in full, once each and newest first, in a bounded number of
// pages, each within a message limit of 64 KiB (pages of 1000 are
// shortened to fit, with next set).
func TestRecordingsListOfThousands(t *testing.T) {
	const n, limit = 5000, 64 << 10
	h := start(t, false, func(c *config.Config) {
		c.Limits = config.DefaultLimits()
		c.Limits.ClientReceiveDefaults.MaximumFrameBytes = 16 << 10
		c.Limits.ClientReceiveDefaults.MaximumMessageBytes = limit
		files := map[string]string{}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range n {
			at := t0.Add(time.Duration(i/3) * time.Second) // 3 a second: ids with -N
			id := fmt.Sprintf("t%d-%s", i%7, at.Format("20060102T150405Z"))
			if i%3 == 2 {
				id = fmt.Sprintf("t%d-%s-2", (i-1)%7, at.Format("20060102T150405Z"))
			}
			cast := fmt.Sprintf(`{"version":2,"width":80,"height":24,"timestamp":%d,"title":"sh"}`+"\n"+`[0.5,"o","hi\r\n"]`+"\n", at.Unix())
			files[id+record.CastSuffix] = cast
		}
		seedRecordings(t, c, files)
	})
	want := ids(h.srv.Recordings().List(""))
	if len(want) != n {
		t.Fatalf("store lists %d, want %d", len(want), n)
	}
	ws := h.rawInit(adminToken)
	ws.SetReadLimit(16 << 20)
	ctx := ctxT(t)
	var got []string
	after := "null"
	requests := 0
	for ; ; requests++ {
		if requests > 60 {
			t.Fatalf("%d requests for %d recordings, and not done", requests, n)
		}
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"recordings/list","params":{"limit":1000,"after":%s}}`, requests+1, after)
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		msg := readJSON(t, ws)
		if l := flow.UTF16Len(msg); l > limit {
			t.Fatalf("page of %d UTF-16 bytes, limit %d", l, limit)
		}
		var res struct {
			Result *recPage `json:"result"`
		}
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Result == nil {
			t.Fatalf("page %d: %v: %.300s", requests, err, msg)
		}
		if len(res.Result.Recordings) == 0 {
			t.Fatalf("page %d is empty: %.300s", requests, msg)
		}
		for _, r := range res.Result.Recordings {
			got = append(got, r.ID)
		}
		if res.Result.Next == nil {
			break
		}
		if requests == 0 && len(res.Result.Recordings) >= 1000 {
			t.Fatalf("first page of %d fits in %d bytes?", len(res.Result.Recordings), limit)
		}
		after = jsonString(*res.Result.Next)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages listed %d recordings; want the store's %d in its order", len(got), len(want))
	}
	t.Logf("%d recordings in %d pages of at most %d UTF-16 bytes", n, requests+1, limit)
}

// TestRecordingsKeyframeInPieces: a keyframe whose screen is larger than
// the message limit (coloured text with multi-byte characters, escaped
// to more) is read in pieces, each within the limit and cut at a
// character, whose concatenation is the stored screen byte for byte; a
// from outside the screen or inside a character is -32602. Under the
// same limit, a recordings/list page stops before a recording whose entry
// alone does not fit, and the page of that one is -32004.
func TestRecordingsKeyframeInPieces(t *testing.T) {
	const limit = 64 << 10
	h := start(t, false, func(c *config.Config) {
		c.Limits = config.DefaultLimits()
		c.Limits.ClientReceiveDefaults.MaximumFrameBytes = 16 << 10
		c.Limits.ClientReceiveDefaults.MaximumMessageBytes = limit
	})
	var b strings.Builder
	for i := 0; b.Len() < 600<<10; i++ {
		fmt.Fprintf(&b, "\x1b[%d;%dH\x1b[38;5;%dm\x1b[48;2;%d;0;0mé漢🙂<\"\\>x", i%200+1, i%300+1, i%256, i%256)
	}
	screen := b.String()
	a := fakeRecording(t, h, "big", 3, screen)
	kf, err := h.srv.Recordings().Keyframe(a.ID, 0)
	if err != nil || kf.Screen != screen {
		t.Fatalf("stored keyframe 0: %d bytes, %v; want the %d-byte screen", len(kf.Screen), err, len(screen))
	}
	ws := h.rawInit(adminToken)
	ws.SetReadLimit(16 << 20)
	ctx := ctxT(t)
	call := func(id int, params string) string {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"recordings/keyframe","params":%s}`, id, params)
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		msg := readJSON(t, ws)
		if l := flow.UTF16Len(msg); l > limit {
			t.Fatalf("answer of %d UTF-16 bytes, limit %d", l, limit)
		}
		return msg
	}
	type piece struct {
		Rows, Cols int
		Screen     string
		From       int
		Next       *int
		Bytes      int
	}
	var got strings.Builder
	pieces := 0
	for from := 0; ; pieces++ {
		if pieces > 100 {
			t.Fatal("more than 100 pieces")
		}
		params := fmt.Sprintf(`{"id":%q,"n":0,"from":%d}`, a.ID, from)
		if from == 0 && pieces == 0 {
			params = fmt.Sprintf(`{"id":%q,"n":0}`, a.ID) // from defaults to 0
		}
		msg := call(pieces+1, params)
		var res struct {
			Result *piece `json:"result"`
		}
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Result == nil {
			t.Fatalf("piece from %d: %v: %.300s", from, err, msg)
		}
		p := res.Result
		if p.From != from || p.Rows != 24 || p.Cols != 80 || p.Bytes != len(screen) {
			t.Fatalf("piece from %d: from %d, %dx%d, bytes %d", from, p.From, p.Cols, p.Rows, p.Bytes)
		}
		got.WriteString(p.Screen)
		if p.Next == nil {
			break
		}
		if *p.Next != from+len(p.Screen) || len(p.Screen) == 0 {
			t.Fatalf("piece from %d of %d bytes: next %d", from, len(p.Screen), *p.Next)
		}
		from = *p.Next
	}
	if got.String() != screen {
		t.Fatalf("%d pieces make %d bytes; not the %d bytes of the screen", pieces+1, got.Len(), len(screen))
	}
	if pieces < 8 {
		t.Fatalf("%d pieces of a %d-byte screen under a %d-byte limit", pieces+1, len(screen), limit)
	}
	t.Logf("a %d-byte screen in %d pieces", len(screen), pieces+1)

	// The end itself: an empty piece, next null.
	if msg := call(200, fmt.Sprintf(`{"id":%q,"n":0,"from":%d}`, a.ID, len(screen))); !strings.Contains(msg, `"screen":"","from":`+itoa(len(screen))+`,"next":null`) {
		t.Fatalf("piece from the end = %.300s", msg)
	}
	// recordings/list under the same limit: a recording whose entry alone
	// is larger (a title of 40,000 characters, 80,000 UTF-16 bytes) is
	// -32004, named; the page before it ends above it.
	st := h.srv.Recordings()
	r, err := st.Start(record.Params{Channel: "titled", Time: time.Now().Add(-time.Hour), Rows: 24, Cols: 80, Title: strings.Repeat("t", 40000), Mode: record.Output,
		Snapshot: func() (int, int, string) { return 24, 80, "" }})
	if err != nil {
		t.Fatal(err)
	}
	titled := r.ID()
	r.Stop("test done")
	list := func(id int, params string) string {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"recordings/list","params":%s}`, id, params)
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		return readJSON(t, ws)
	}
	var first struct {
		Result recPage `json:"result"`
	}
	if err := json.Unmarshal([]byte(list(300, `{"limit":1000}`)), &first); err != nil || len(first.Result.Recordings) != 1 ||
		first.Result.Recordings[0].ID != a.ID || first.Result.Next == nil {
		t.Fatalf("first page = %+v, %v; want %s alone and a next", first.Result, err, a.ID)
	}
	if msg := list(301, `{"after":`+jsonString(*first.Result.Next)+`}`); !strings.Contains(msg, `"code":-32004`) || !strings.Contains(msg, titled) {
		t.Fatalf("page of a recording larger than the limit = %.300s, want -32004 naming %s", msg, titled)
	}

	mid := strings.Index(screen, "é") + 1
	for _, from := range []int{-1, len(screen) + 1, mid} {
		if msg := call(201, fmt.Sprintf(`{"id":%q,"n":0,"from":%d}`, a.ID, from)); !strings.Contains(msg, `"code":-32602`) || !strings.Contains(msg, "from:") {
			t.Errorf("from %d = %.300s, want -32602", from, msg)
		}
	}
}

// TestListRecordingsPages: ListRecordings over the gRPC socket answers
// pages of page_size (0: 1000; more than 1000: 1000) with a
// next_page_token, and following the tokens lists every recording once,
// newest first, of a channel too; a negative page_size or a page_token
// that is not one is INVALID_ARGUMENT.
func TestListRecordingsPages(t *testing.T) {
	const n = 2500
	h := start(t, false, func(c *config.Config) {
		files := map[string]string{}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range n {
			at := t0.Add(time.Duration(i/2) * time.Second)
			id := fmt.Sprintf("t%d-%s", i%2, at.Format("20060102T150405Z"))
			cast := fmt.Sprintf(`{"version":2,"width":80,"height":24,"timestamp":%d}`+"\n", at.Unix())
			files[id+record.CastSuffix] = cast
		}
		seedRecordings(t, c, files)
	})
	rc := ahpv1.NewRecordingServiceClient(h.control().cc)
	ctx := ctxT(t)
	all := func(req *ahpv1.ListRecordingsRequest, size int) (got []string, pages int) {
		t.Helper()
		for ; ; pages++ {
			if pages > n/size+2 {
				t.Fatalf("more than %d pages", pages)
			}
			res, err := rc.ListRecordings(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Recordings) > size {
				t.Fatalf("page of %d, page_size %d", len(res.Recordings), req.PageSize)
			}
			for _, r := range res.Recordings {
				got = append(got, r.Id)
			}
			if res.NextPageToken == "" {
				return got, pages + 1
			}
			req.PageToken = res.NextPageToken
		}
	}
	st := h.srv.Recordings()
	for _, tc := range []struct {
		req   *ahpv1.ListRecordingsRequest
		size  int
		want  []string
		pages int
	}{
		{&ahpv1.ListRecordingsRequest{}, 1000, ids(st.List("")), 3},
		{&ahpv1.ListRecordingsRequest{PageSize: 1 << 30}, 1000, ids(st.List("")), 3},
		{&ahpv1.ListRecordingsRequest{PageSize: 700, Channel: "ahp-terminal:/t1"}, 700, ids(st.List("t1")), 2},
	} {
		got, pages := all(tc.req, tc.size)
		if !slices.Equal(got, tc.want) || pages != tc.pages {
			t.Errorf("%v: %d recordings in %d pages, want %d in %d, in the store's order", tc.req, len(got), pages, len(tc.want), tc.pages)
		}
	}
	if res, err := rc.ListRecordings(ctx, &ahpv1.ListRecordingsRequest{PageSize: 1}); err != nil || len(res.Recordings) != 1 || res.NextPageToken == "" {
		t.Fatalf("page_size 1: %d recordings, token %q, %v", len(res.GetRecordings()), res.GetNextPageToken(), err)
	}
	for _, req := range []*ahpv1.ListRecordingsRequest{
		{PageSize: -1},
		{PageToken: "t0-20260101T000000Z"},
		{PageToken: "20260101T000000Z 000001 " + strings.Repeat("t", 600)},
	} {
		if _, err := rc.ListRecordings(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", req, err)
		}
	}
}

// TestRecordingsIndexDroppedAudit: recordings/index sums what the
// recording's index says it dropped: output bytes, and audit events it
// could not write (pty/record marks them once it has room again).
func TestRecordingsIndexDroppedAudit(t *testing.T) {
	const id = "t1-20260101T000000Z"
	h := start(t, false, func(c *config.Config) {
		index := `{"type":"keyframe","time":0.000000,"offset":62,"rows":24,"cols":80,"screen":"\u001b[Hhi"}` + "\n" +
			`{"type":"audit","time":0.100000,"event":"attach","viewer":"c1","token":"tok-1","role":"view","remote":"127.0.0.1:9"}` + "\n" +
			`{"type":"dropped","time":0.200000,"bytes":0,"audit":3}` + "\n" +
			`{"type":"dropped","time":0.300000,"bytes":5}` + "\n" +
			`{"type":"dropped","time":0.400000,"bytes":0,"audit":4}` + "\n"
		seedRecordings(t, c, map[string]string{id + record.CastSuffix: oneLineCast, id + record.IndexSuffix: index})
	})
	ws := h.rawInit(adminToken)
	ctx := ctxT(t)
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"recordings/index","params":{"id":"`+id+`"}}`)); err != nil {
		t.Fatal(err)
	}
	msg := readJSON(t, ws)
	var res struct {
		Result *struct {
			Audit        []struct{ Event string } `json:"audit"`
			Dropped      int64                    `json:"dropped"`
			DroppedAudit int64                    `json:"droppedAudit"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Result == nil {
		t.Fatalf("recordings/index: %v: %.300s", err, msg)
	}
	if r := res.Result; len(r.Audit) != 1 || r.Dropped != 5 || r.DroppedAudit != 7 {
		t.Fatalf("recordings/index = %s; want one audit event, 5 bytes and 7 audit events dropped", msg)
	}
}

// TestRecordingsIndexAuditPages: an index whose audit is larger than a
// message (30,000 events, a viewer that came and went for a week) comes
// in pages: each within the message limit with every keyframe, the audit
// from auditFrom on, auditNext where the next page starts; together they
// are the whole audit once, in order. A bad auditFrom is -32602.
func TestRecordingsIndexAuditPages(t *testing.T) {
	const id, n = "t1-20260101T000000Z", 30_000
	const limit = 256 << 10
	h := start(t, false, func(c *config.Config) {
		c.Limits = config.DefaultLimits()
		c.Limits.ClientReceiveDefaults.MaximumFrameBytes = 16 << 10
		c.Limits.ClientReceiveDefaults.MaximumMessageBytes = limit
		var index strings.Builder
		for k := range 3 {
			fmt.Fprintf(&index, `{"type":"keyframe","time":%d.000000,"offset":62,"rows":24,"cols":80,"screen":"\u001b[Hhi"}`+"\n", k)
		}
		for i := range n {
			fmt.Fprintf(&index, `{"type":"audit","time":%d.%06d,"event":"attach","viewer":"c%d","token":"tok-1","role":"view","remote":"127.0.0.1:%d"}`+"\n", 3+i/1000, i%1000, i, 1000+i%50000)
		}
		seedRecordings(t, c, map[string]string{id + record.CastSuffix: oneLineCast, id + record.IndexSuffix: index.String()})
	})
	ws := h.rawInit(adminToken)
	ws.SetReadLimit(16 << 20)
	ctx := ctxT(t)
	ask := func(reqID int, params string) string {
		t.Helper()
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"recordings/index","params":%s}`, reqID, params)
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		return readJSON(t, ws)
	}
	var viewers []string
	from, pages := 0, 0
	for {
		pages++
		if pages > 200 {
			t.Fatalf("more than 200 pages for %d audit events", n)
		}
		msg := ask(pages, fmt.Sprintf(`{"id":%q,"auditFrom":%d}`, id, from))
		if l := flow.UTF16Len(msg); l > limit {
			t.Fatalf("page of %d UTF-16 bytes, limit %d", l, limit)
		}
		var res struct {
			Result *struct {
				Keyframes []struct{ Time float64 }  `json:"keyframes"`
				Audit     []struct{ Viewer string } `json:"audit"`
				AuditFrom int                       `json:"auditFrom"`
				AuditNext *int                      `json:"auditNext"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Result == nil {
			t.Fatalf("page %d: %v: %.300s", pages, err, msg)
		}
		r := res.Result
		if len(r.Keyframes) != 3 || r.AuditFrom != from || len(r.Audit) == 0 {
			t.Fatalf("page %d from %d: %d keyframes, auditFrom %d, %d audit events", pages, from, len(r.Keyframes), r.AuditFrom, len(r.Audit))
		}
		for _, a := range r.Audit {
			viewers = append(viewers, a.Viewer)
		}
		if r.AuditNext == nil {
			break
		}
		if *r.AuditNext != from+len(r.Audit) {
			t.Fatalf("page %d: auditNext %d, want %d", pages, *r.AuditNext, from+len(r.Audit))
		}
		from = *r.AuditNext
	}
	if pages < 2 || len(viewers) != n {
		t.Fatalf("%d pages, %d audit events; want several pages and %d", pages, len(viewers), n)
	}
	for i, v := range viewers {
		if v != "c"+strconv.Itoa(i) {
			t.Fatalf("audit event %d is %s's", i, v)
		}
	}
	for k, bad := range []string{"-1", strconv.Itoa(n + 1), `"x"`} {
		msg := ask(1000+k, fmt.Sprintf(`{"id":%q,"auditFrom":%s}`, id, bad))
		if !strings.Contains(msg, `"code":-32602`) {
			t.Fatalf("auditFrom %s: %s, want -32602", bad, msg)
		}
	}
}

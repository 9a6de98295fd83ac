package flow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// jsonFrame is the envelope as encoding/json sees it.
type jsonFrame struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  struct {
		Channel        string `json:"channel"`
		SubscriptionID string `json:"subscriptionId"`
		MessageID      int64  `json:"messageId"`
		Data           string `json:"data"`
		Final          bool   `json:"final"`
	} `json:"params"`
}

// fragmentAll fragments msg and checks every frame against the rules of
// PROTOCOL.md §4: it fits, decodes with DecodeFrame and encoding/json to
// the expected envelope, reports its payload, never ends inside a UTF-8
// sequence or surrogate pair, and only the last is final. It returns the
// frames.
func fragmentAll(t testing.TB, channel, sub string, id int64, msg string, maxFrame int64) [][]byte {
	t.Helper()
	var f flow.Fragmenter
	if err := f.Reset(channel, sub, id, msg, maxFrame); err != nil {
		t.Fatalf("Reset(%q, %q, %d, len %d, %d) = %v", channel, sub, id, len(msg), maxFrame, err)
	}
	var frames [][]byte
	var data strings.Builder
	for i := 0; ; i++ {
		if f.Done() {
			t.Fatalf("Done() before the final frame")
		}
		frame, payload, final := f.Next(nil)
		frames = append(frames, frame)
		if size := flow.UTF16Len(string(frame)); size > maxFrame {
			t.Fatalf("frame %d: UTF16Len = %d, want ≤ %d", i, size, maxFrame)
		}
		if !utf8.Valid(frame) {
			t.Fatalf("frame %d is not valid UTF-8: %q", i, frame)
		}
		var fr flow.Frame
		if err := flow.DecodeFrame(frame, &fr); err != nil {
			t.Fatalf("DecodeFrame(frame %d %s) = %v", i, frame, err)
		}
		d, err := fr.Data()
		if err != nil {
			t.Fatalf("frame %d: Data() = %v", i, err)
		}
		if fr.Channel != replaceInvalid(channel) || fr.SubscriptionID != replaceInvalid(sub) || fr.MessageID != id || fr.Final != final {
			t.Fatalf("frame %d decodes to %+v, want channel %q sub %q id %d final %v", i, fr, channel, sub, id, final)
		}
		var jf jsonFrame
		if err := json.Unmarshal(frame, &jf); err != nil {
			t.Fatalf("encoding/json rejects frame %d %s: %v", i, frame, err)
		}
		if jf.JSONRPC != "2.0" || jf.Method != "channel/frame" || jf.Params.Data != d ||
			jf.Params.Channel != fr.Channel || jf.Params.SubscriptionID != fr.SubscriptionID ||
			jf.Params.MessageID != id || jf.Params.Final != final {
			t.Fatalf("encoding/json decodes frame %d to %+v, DecodeFrame to %+v", i, jf, fr)
		}
		if p := flow.UTF16Len(d); p != payload {
			t.Fatalf("frame %d: payload = %d, want UTF16Len(data) = %d", i, payload, p)
		}
		if !final && payload == 0 {
			t.Fatalf("frame %d: no progress", i)
		}
		data.WriteString(d)
		if final {
			break
		}
	}
	if !f.Done() {
		t.Fatalf("Done() = false after the final frame")
	}
	if frame, payload, final := f.Next([]byte("x")); string(frame) != "x" || payload != 0 || !final {
		t.Fatalf("Next after the final frame = %q, %d, %v; want dst, 0, true", frame, payload, final)
	}
	if got, want := data.String(), replaceInvalid(msg); got != want {
		t.Fatalf("reassembled %d bytes != message %d bytes\n got %.200q\nwant %.200q", len(got), len(want), got, want)
	}
	return frames
}

func TestFragmenter(t *testing.T) {
	emoji := strings.Repeat("😀", 2000)
	tests := []struct {
		name string
		msg  string
	}{
		{"empty data", ""},
		{"short", `{"jsonrpc":"2.0","method":"terminal/output","params":{"data":"hi"}}`},
		{"ascii", strings.Repeat("abcdefghij", 1000)},
		{"escapes", strings.Repeat("\x1b[1;31m\"q\"\\b\\<>&\n\t\x00", 400)},
		{"only ESC", strings.Repeat("\x1b", 4096)},
		{"only <", strings.Repeat("<", 4096)},
		{"json-heavy", strings.Repeat(notification("terminal/output", `say "hi" \ bye`), 200)},
		{"cjk", strings.Repeat("日本語の文章です。", 800)},
		{"emoji", emoji},
		{"mixed", strings.Repeat("a日😀\"\x1b", 1500)},
		{"invalid utf8", strings.Repeat("a\xff\xc3b\xed\xa0\x80", 700)},
		{"u2028", strings.Repeat("\u2028\u2029", 1000)},
	}
	for _, tt := range tests {
		for _, maxFrame := range []int64{1024, 1025, 1030, 4096, 16 << 10} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, maxFrame), func(t *testing.T) {
				frames := fragmentAll(t, "ahp-terminal:/t1", "s1", 42, tt.msg, maxFrame)
				if len(tt.msg) > 0 && len(frames) > 1 {
					// Frames are full: every non-final frame is within one
					// character's cost of the limit.
					for i, fr := range frames[:len(frames)-1] {
						if size := flow.UTF16Len(string(fr)); size < maxFrame-2*26-12 {
							t.Errorf("frame %d: size %d wastes room under %d", i, size, maxFrame)
						}
					}
				}
			})
		}
	}
}

// TestFragmenterSurrogateBoundary puts an emoji at every offset around a
// frame boundary: the pair is never split (PROTOCOL.md §4; lessons b.7).
func TestFragmenterSurrogateBoundary(t *testing.T) {
	for pad := 0; pad < 600; pad++ {
		msg := strings.Repeat("a", pad) + "😀" + strings.Repeat("b", 600) + "😀😀"
		fragmentAll(t, "c", "s", 1, msg, 1024)
	}
	for pad := 0; pad < 40; pad++ {
		msg := strings.Repeat("\x1b", pad) + strings.Repeat("😀x", 400)
		fragmentAll(t, "c", "s", 7, msg, 1024)
	}
}

func TestFragmenterEnvelope(t *testing.T) {
	long := strings.Repeat("c", 600)
	tests := []struct {
		channel, sub string
		id           int64
		maxFrame     int64
		wantErr      bool
	}{
		{"c", "s", 1, 1024, false},
		{"ahp-terminal:/x", "sub-1", flow.MaxSafeInteger, 1024, false},
		{"日本", "\"s\"\x01", 1, 1024, false},
		{long, long, 1, 1024, true},
		{long, long, 1, 8192, false},
		{strings.Repeat("\x00", 80), "s", 1, 1024, true}, // 80 × 12 bytes of escapes
	}
	for _, tt := range tests {
		var f flow.Fragmenter
		err := f.Reset(tt.channel, tt.sub, tt.id, "data", tt.maxFrame)
		if tt.wantErr {
			if !errors.Is(err, flow.ErrEnvelopeTooLarge) {
				t.Errorf("Reset(len %d, len %d, %d) = %v, want ErrEnvelopeTooLarge", len(tt.channel), len(tt.sub), tt.maxFrame, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Reset(%q, %q, %d) = %v", tt.channel, tt.sub, tt.maxFrame, err)
			continue
		}
		fragmentAll(t, tt.channel, tt.sub, tt.id, strings.Repeat("d😀\x1b", 500), tt.maxFrame)
	}
}

// TestFragmenterReuse checks steady state: a reused Fragmenter and output
// buffer allocate nothing per frame.
func TestFragmenterReuse(t *testing.T) {
	msg := strings.Repeat("hello \x1b[0m 日本 😀 \"x\"", 2000)
	var f flow.Fragmenter
	buf := make([]byte, 0, 32<<10)
	allocs := testing.AllocsPerRun(20, func() {
		if err := f.Reset("ahp-terminal:/t", "s1", 99, msg, 16<<10); err != nil {
			t.Fatal(err)
		}
		for !f.Done() {
			buf, _, _ = f.Next(buf[:0])
		}
	})
	if allocs != 0 {
		t.Errorf("fragmenting with reused buffers: %v allocs per message, want 0", allocs)
	}
}

// TestFragmenterPlainSpan: a span marked plain (Message.PlainFrom/To, as
// TCP marks its base64) gives exactly the frames of the unmarked message,
// at every frame size; a span outside the message or inverted is ignored.
func TestFragmenterPlainSpan(t *testing.T) {
	body := strings.Repeat("QUJDRA+/", 700) // base64 characters
	msg := `{"jsonrpc":"2.0","method":"tcp/data","params":{"offset":12,"data":"` + body + `"}}`
	from := strings.Index(msg, body)
	to := from + len(body)
	frames := func(maxFrame int64, lo, hi int) []string {
		var f flow.Fragmenter
		if err := f.Reset("ahp-tcp:/x", "s1", 3, msg, maxFrame); err != nil {
			t.Fatal(err)
		}
		f.Plain(lo, hi)
		var out []string
		for !f.Done() {
			b, _, _ := f.Next(nil)
			out = append(out, string(b))
		}
		return out
	}
	for _, maxFrame := range []int64{300, 301, 1024, 1031, 4096, 8191, 1 << 20} {
		want := frames(maxFrame, 0, 0)
		for _, span := range [][2]int{{from, to}, {from + 5, to - 7}, {from, from + 1}, {-1, to}, {from, len(msg) + 1}, {to, from}} {
			if got := frames(maxFrame, span[0], span[1]); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("maxFrame %d, plain span %v: %d frames differ from the unmarked message's %d", maxFrame, span, len(got), len(want))
			}
		}
		fragmentAll(t, "ahp-tcp:/x", "s1", 3, msg, maxFrame) // and the unmarked frames are valid
	}
}

// fragments cuts a message into frames, given as text (Reset) or as its
// escaped body (ResetEscaped), and returns the frames and their payloads.
func fragments(t testing.TB, msg string, escaped bool, maxFrame, room int64) (frames []string, payloads []int64) {
	t.Helper()
	var f flow.Fragmenter
	reset := f.Reset
	if escaped {
		reset = f.ResetEscaped
	}
	if err := reset("ahp-terminal:/t", "s1", 9, msg, maxFrame); err != nil {
		t.Fatal(err)
	}
	for !f.Done() {
		b, p, _ := f.NextIn(nil, room)
		frames, payloads = append(frames, string(b)), append(payloads, p)
	}
	return frames, payloads
}

// checkEscapedFrames: a message given as its escaped body is cut into
// the same frames, byte for byte and with the same payloads, as the same
// message given as text, whatever the frame size and transport room, and
// its text size is the text's.
func checkEscapedFrames(t testing.TB, data string, maxFrame, room int64) {
	t.Helper()
	text := notification("terminal/output", data)
	esc := string(flow.AppendEscaped(nil, text))
	if got, want := flow.EscapedTextSize(esc), flow.UTF16Len(text); got != want {
		t.Fatalf("EscapedTextSize = %d, want UTF16Len(text) = %d (data %.80q)", got, want, data)
	}
	wantFrames, wantPayloads := fragments(t, text, false, maxFrame, room)
	gotFrames, gotPayloads := fragments(t, esc, true, maxFrame, room)
	if strings.Join(gotFrames, "\n") != strings.Join(wantFrames, "\n") || fmt.Sprint(gotPayloads) != fmt.Sprint(wantPayloads) {
		for i := range min(len(gotFrames), len(wantFrames)) {
			if gotFrames[i] != wantFrames[i] || gotPayloads[i] != wantPayloads[i] {
				t.Fatalf("maxFrame %d room %d: frame %d of %d (want %d)\n got %d %.200q\nwant %d %.200q", maxFrame, room, i, len(gotFrames), len(wantFrames), gotPayloads[i], gotFrames[i], wantPayloads[i], wantFrames[i])
			}
		}
		t.Fatalf("maxFrame %d room %d: %d frames, want %d", maxFrame, room, len(gotFrames), len(wantFrames))
	}
}

func TestFragmenterEscaped(t *testing.T) {
	lines := strings.Repeat("total 48\r\ndrwxr-xr-x 2 \"me\" C:\\dir\t\x1b[1;32mok\x1b[0m\r\n", 300)
	cases := []string{
		"",
		"a",
		`\`,
		`"`,
		strings.Repeat(`\`, 1000),
		strings.Repeat(`"\`, 700),
		strings.Repeat("\x00\x1f\n", 400),
		lines,
	}
	for _, data := range cases {
		for _, maxFrame := range []int64{300, 301, 302, 303, 1024, 1031, 4096, 65536} {
			for _, room := range []int64{maxFrame, 300, 301, 1 << 40} {
				checkEscapedFrames(t, data, maxFrame, room)
			}
		}
	}
}

func TestAppendEscapedTwice(t *testing.T) {
	for _, s := range []string{"", "plain text", "\x00\x01\x1f\x7f\"\\\n\r\t\b\f/<>&", strings.Repeat("ab\"c\\d\r\n", 50)} {
		got, n16, ascii := flow.AppendEscapedTwice([]byte("x"), s)
		want := "x" + string(flow.AppendEscaped(nil, string(flow.AppendEscaped(nil, s))))
		if string(got) != want || n16 != flow.EscapedLen(s) || !ascii {
			t.Errorf("AppendEscapedTwice(%q) = %q, %d, %v; want %q, %d, true", s, got, n16, ascii, want, flow.EscapedLen(s))
		}
	}
	for c := range 0x80 { // every ASCII byte, each escape spelled out
		s := string(rune(c))
		got, _, _ := flow.AppendEscapedTwice(nil, s)
		if want := flow.AppendEscaped(nil, string(flow.AppendEscaped(nil, s))); string(got) != string(want) {
			t.Errorf("AppendEscapedTwice(%q) = %q, want %q", s, got, want)
		}
	}
	for _, s := range []string{"é", "abc\x80", strings.Repeat("a", 100) + "日本"} {
		if _, _, ascii := flow.AppendEscapedTwice(nil, s); ascii {
			t.Errorf("AppendEscapedTwice(%q) says ASCII", s)
		}
	}
}

// checkEscapedTwicePrefix: AppendEscapedTwicePrefix writes, in one pass,
// what EscapedPrefix measures and AppendEscapedTwice writes of it.
func checkEscapedTwicePrefix(t testing.TB, s string, budget int64) {
	t.Helper()
	k, size := flow.EscapedPrefix(s, budget)
	want, _, _ := flow.AppendEscapedTwice([]byte("x"), s[:k])
	got, n, n16 := flow.AppendEscapedTwicePrefix([]byte("x"), s, budget)
	if n != k || n16 != size || string(got) != string(want) {
		t.Fatalf("AppendEscapedTwicePrefix(%.60q, %d) = %.60q, %d, %d; want %.60q, %d, %d", s, budget, got, n, n16, want, k, size)
	}
}

func TestAppendEscapedTwicePrefix(t *testing.T) {
	for _, s := range []string{"", "abc", "ab\"cd\\ef\r\n\x1bgh", strings.Repeat("0123456789abcdef", 20) + "\r\n", strings.Repeat("\x00", 40)} {
		for budget := int64(0); budget <= 2*6*int64(len(s))+4; budget++ {
			checkEscapedTwicePrefix(t, s, budget)
		}
	}
}

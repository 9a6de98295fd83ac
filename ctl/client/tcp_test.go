package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/wire"
)

var parseTCPDataCases = []string{
	`{"offset":0,"data":"aGVsbG8="}`,
	`{"offset":12345,"data":""}`,
	`{"data":"aGk=","offset":7}`,                 // another order: encoding/json
	`{"offset":3,"data":"aGk\u003d"}`,            // escaped: encoding/json
	`{"offset":3,"data":"aGk=","extra":true}`,    // more members
	`{"offset":-1,"data":"aGk="}`,                // negative
	`{"offset":3,"data":"aGk"}`,                  // unpadded
	`{"offset":3}`,                               // no data
	`{"offset":99999999999999999,"data":"aGk="}`, // 17 digits: encoding/json
	`{"offset":1,"data":"a\"b"}`,
	`{"offset":01,"data":"aGk="}`,           // not JSON
	`{"offset":3,"data":"aGk\/"}`,           // '/' escaped, as JSON allows: encoding/json
	`{"offset":3,"data":"aGk=","x":"aGk="}`, // a string member after data
}

func TestParseTCPData(t *testing.T) {
	for _, tc := range []struct {
		in   string
		off  int64
		data string
		ok   bool
	}{
		{parseTCPDataCases[0], 0, "hello", true},
		{parseTCPDataCases[1], 12345, "", true},
		{parseTCPDataCases[2], 7, "hi", true},
		{parseTCPDataCases[3], 3, "hi", true},
		{parseTCPDataCases[4], 3, "hi", true},
		{parseTCPDataCases[5], 0, "", false},
		{parseTCPDataCases[6], 0, "", false},
		{parseTCPDataCases[7], 0, "", false},
		{parseTCPDataCases[8], 99999999999999999, "hi", true},
		{parseTCPDataCases[9], 0, "", false},
		{parseTCPDataCases[11], 3, "hi?", true},
		{parseTCPDataCases[12], 3, "hi", true},
	} {
		off, data, err := parseTCPData(nil, []byte(tc.in))
		if (err == nil) != tc.ok || err == nil && (off != tc.off || string(data) != tc.data) {
			t.Errorf("parseTCPData(%s) = %d, %q, %v; want %d, %q, ok %v", tc.in, off, data, err, tc.off, tc.data, tc.ok)
		}
	}
}

// FuzzParseTCPData: the fast path and encoding/json agree, and nothing
// panics.
func FuzzParseTCPData(f *testing.F) {
	for _, c := range parseTCPDataCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		off, data, err := parseTCPData(bytes.Repeat([]byte("x"), 24), in) // a reused buffer: its old bytes must not show
		var p struct {
			Offset *int64  `json:"offset"`
			Data   *string `json:"data"`
		}
		jerr := json.Unmarshal(in, &p)
		if jerr != nil || p.Offset == nil || p.Data == nil || *p.Offset < 0 {
			if err == nil && jerr != nil {
				t.Fatalf("parseTCPData(%q) accepted what encoding/json refuses: %v", in, jerr)
			}
			return
		}
		want, derr := base64.StdEncoding.DecodeString(*p.Data)
		if (derr == nil) != (err == nil) {
			t.Fatalf("parseTCPData(%q): err %v, base64 %v", in, err, derr)
		}
		if err == nil && (off != *p.Offset || !bytes.Equal(data, want)) {
			t.Fatalf("parseTCPData(%q) = %d, %q; encoding/json says %d, %q", in, off, data, *p.Offset, want)
		}
	})
}

// TestTCPInputFits: a tcp/input of tcpInputBytes(m) bytes at the largest
// offset is at most m UTF-16 bytes, and round-trips.
func TestTCPInputFits(t *testing.T) {
	for _, m := range []int64{1024, 4096, 4097, 64 << 10, 1 << 20} {
		n := tcpInputBytes(m)
		data := bytes.Repeat([]byte{0xfb}, n)
		msg, _ := appendTCPInput(nil, flow.MaxSafeInteger, data)
		if size := flow.UTF16Len(string(msg)); size > m {
			t.Errorf("tcpInputBytes(%d) = %d: the message is %d UTF-16 bytes", m, n, size)
		}
		if more, _ := appendTCPInput(nil, flow.MaxSafeInteger, append(data, 1, 2, 3)); flow.UTF16Len(string(more)) <= m {
			t.Errorf("tcpInputBytes(%d) = %d leaves room for 3 more bytes", m, n)
		}
		_, params := splitEnvelope(msg)
		off, got, err := parseTCPData(nil, params)
		if err != nil || off != flow.MaxSafeInteger || !bytes.Equal(got, data) {
			t.Errorf("round trip of %d bytes: %d, %d bytes, %v", n, off, len(got), err)
		}
	}
}

// journaled returns a stream whose journal holds messages of the given
// sizes (UTF-16 bytes; the last one tcp/eof if eof), as if written.
func journaled(sizes []int64, eof bool) *TCPStream {
	s := &TCPStream{changed: make(chan struct{}), readable: make(chan struct{})}
	for i, n := range sizes {
		class := flow.Data
		if eof && i == len(sizes)-1 {
			class = flow.Lifecycle
		}
		s.appendOutLocked(strings.Repeat("x", int(n/2)), class)
	}
	return s
}

func resumeResult(accepted, released flow.Position, window int64) *wire.SubscribeResult {
	l := flow.ReceiveLimits{WindowBytes: window, MaximumFrameBytes: 1024, MaximumMessageBytes: 64 << 10}
	res := &wire.SubscribeResult{SubscriptionID: "s9", Channel: "ahp-tcp:/1", FlowControl: FlowControl{ClientReceive: l, HostReceive: l}}
	res.Resume = &flow.ResumeResult{Token: "t", Accepted: accepted, Released: released}
	return res
}

// TestTCPResumeReconcile: the host's positions after a reconnect decide
// what the journal drops, what stays outstanding and what is sent again;
// positions that do not fit it fail the resume.
func TestTCPResumeReconcile(t *testing.T) {
	p := func(id, pos int64) flow.Position { return flow.Position{MessageID: id, Position: pos} }
	// Messages 1–4 end at 1000, 3000, 6000, 10000.
	sizes := []int64{1000, 2000, 3000, 4000}
	for _, tc := range []struct {
		name               string
		accepted, released flow.Position
		window             int64
		wantErr            bool
		retained, resent   int   // journal entries left, of which resent
		nextSend           int64 // first id framed again
		outstanding        int64 // in the new window
	}{
		{"nothing arrived", p(0, 0), p(0, 0), 1 << 20, false, 4, 4, 1, 0},
		{"all arrived, none released", p(4, 10000), p(0, 0), 1 << 20, false, 4, 0, 5, 10000},
		{"two arrived, one released", p(2, 3000), p(1, 1000), 1 << 20, false, 3, 2, 3, 2000},
		{"all released", p(4, 10000), p(4, 10000), 1 << 20, false, 0, 0, 5, 0},
		{"released beyond accepted", p(1, 1000), p(2, 3000), 1 << 20, true, 0, 0, 0, 0},
		{"accepted beyond sent", p(5, 11000), p(0, 0), 1 << 20, true, 0, 0, 0, 0},
		{"off a boundary", p(2, 2500), p(0, 0), 1 << 20, true, 0, 0, 0, 0},
		{"wrong id at a boundary", p(3, 3000), p(0, 0), 1 << 20, true, 0, 0, 0, 0},
		{"outstanding no longer fits the window", p(4, 10000), p(0, 0), 2048, true, 0, 0, 0, 0},
	} {
		s := journaled(sizes, false)
		b := &tcpBinding{s: s}
		s.recv = flow.NewReceiver(resumeResult(p(0, 0), p(0, 0), 1<<20).FlowControl.ClientReceive)
		err := s.attachLocked(b, resumeResult(tc.accepted, tc.released, tc.window))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: attach = %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrResumeMismatch) {
				t.Errorf("%s: %v does not wrap ErrResumeMismatch", tc.name, err)
			}
			if s.cur != nil {
				t.Errorf("%s: a refused resume became the subscription in use", tc.name)
			}
			continue
		}
		if len(s.out) != tc.retained || int(s.stats.Resent) != tc.resent || b.nextSend != tc.nextSend || b.win.Outstanding() != tc.outstanding || b.base != tc.released.Position || s.outReleased != tc.released {
			t.Errorf("%s: retained %d, resent %d, nextSend %d, outstanding %d, base %d, released %v; want %d, %d, %d, %d, %d, %v",
				tc.name, len(s.out), s.stats.Resent, b.nextSend, b.win.Outstanding(), b.base, s.outReleased,
				tc.retained, tc.resent, tc.nextSend, tc.outstanding, tc.released.Position, tc.released)
		}
		// The host's credit is in journal positions: crediting message 3
		// (end 6000), when the host has it, works whatever the base.
		if tc.released.Position < 6000 && tc.accepted.Position >= 6000 {
			b.onCredit(6000)
			if s.err != nil || s.outReleased != p(3, 6000) || len(s.out) != 1 {
				t.Errorf("%s: credit at 6000: err %v, released %v, %d retained", tc.name, s.err, s.outReleased, len(s.out))
			}
		}
	}
}

// TestTCPResumeLifecycle: a journaled tcp/eof the host already accepted
// counts as a lifecycle message in the new window.
func TestTCPResumeLifecycle(t *testing.T) {
	s := journaled([]int64{2000, 100}, true)
	s.recv = flow.NewReceiver(flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10})
	b := &tcpBinding{s: s}
	// A window of 1024: the data message fills it, the EOF still fits.
	if err := s.attachLocked(b, resumeResult(flow.Position{MessageID: 2, Position: 2100}, flow.Position{}, 1024)); err != nil {
		t.Fatal(err)
	}
	if b.win.Outstanding() != 2100 || b.nextSend != 3 {
		t.Fatalf("outstanding %d, nextSend %d; want 2100, 3", b.win.Outstanding(), b.nextSend)
	}
}

// TestTCPReceive: offsets are checked; duplicates are suppressed, gaps
// and a wrong EOF offset fail; bytes are released (credited) only once
// read.
func TestTCPReceive(t *testing.T) {
	limits := flow.ReceiveLimits{WindowBytes: 64 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10}
	data := func(off int64, s string) string {
		msg, _ := appendTCPInput(nil, off, []byte(s))
		return strings.Replace(string(msg), "tcp/input", "tcp/data", 1)
	}
	eof := func(off int64) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"tcp/eof","params":{"offset":%d}}`, off)
	}
	for _, tc := range []struct {
		name string
		msgs []string
		want string // what Read returns, then EOF if eof
		err  string // the stream's error, if any
	}{
		{"in order", []string{data(0, "abc"), data(3, "def"), eof(6)}, "abcdef", ""},
		{"overlap suppressed", []string{data(0, "abc"), data(1, "bcd"), data(0, "ab"), eof(4)}, "abcd", ""},
		{"gap", []string{data(0, "abc"), data(4, "e")}, "abc", "gap"},
		{"eof short", []string{data(0, "abc"), eof(2)}, "abc", "tcp/eof: offset 2"},
		{"data after eof", []string{data(0, "a"), eof(1), data(1, "b")}, "a", "after tcp/eof"},
	} {
		s := &TCPStream{changed: make(chan struct{}), readable: make(chan struct{}), recv: flow.NewReceiver(limits)}
		var pos int64
		var err error
		for i, m := range tc.msgs {
			pos += flow.UTF16Len(m)
			if err = feed(s, int64(i+1), m); err != nil {
				break
			}
		}
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: receive error %v, want %q", tc.name, err, tc.err)
			continue
		}
		if err != nil {
			s.failLocked(err)
		}
		// Nothing is released before it is read.
		if s.recv.Released().Position != 0 && len(tc.want) > 0 {
			t.Errorf("%s: released %v before any Read", tc.name, s.recv.Released())
		}
		if tc.err != "" {
			continue
		}
		got, rerr := io.ReadAll(onlyReader{s})
		if rerr != nil || string(got) != tc.want {
			t.Errorf("%s: read %q, %v; want %q", tc.name, got, rerr, tc.want)
		}
		if s.recv.Released() != s.recv.Accepted() || s.creditWant != pos {
			t.Errorf("%s: after reading all: released %v of %v, credit %d of %d", tc.name, s.recv.Released(), s.recv.Accepted(), s.creditWant, pos)
		}
	}
}

// failAfter takes n bytes, then fails.
type failAfter struct {
	n   int
	got []byte
}

func (w *failAfter) Write(p []byte) (int, error) {
	k := min(len(p), w.n-len(w.got))
	w.got = append(w.got, p[:k]...)
	if k < len(p) {
		return k, errors.New("local socket failed")
	}
	return k, nil
}

// TestTCPWriteTo: messages queued before WriteTo runs (more than one
// write takes) reach w whole and in order; a write that fails partway
// leaves exactly the bytes it did not take for the next WriteTo; all is
// released (credited) once written, and not before.
func TestTCPWriteTo(t *testing.T) {
	s, want, pos := queuedStream(t, 19)
	// The first write fails in the middle of the third message.
	w := &failAfter{n: 100 + 101 + 50}
	n, err := s.WriteTo(w)
	if err == nil || n != int64(w.n) || !bytes.Equal(w.got, want[:w.n]) {
		t.Fatalf("WriteTo into a failing writer = %d, %v; took %d bytes", n, err, len(w.got))
	}
	if s.recv.Released().MessageID != 2 {
		t.Errorf("after 2½ messages written: released %v, want message 2's end", s.recv.Released())
	}
	var rest bytes.Buffer
	n, err = s.WriteTo(&rest)
	if err != nil || n != int64(len(want)-w.n) || !bytes.Equal(rest.Bytes(), want[w.n:]) {
		t.Fatalf("WriteTo of the rest = %d, %v; %d bytes, want %d", n, err, rest.Len(), len(want)-w.n)
	}
	if s.recv.Released() != s.recv.Accepted() || s.creditWant != pos {
		t.Errorf("after writing all: released %v of %v, credit %d of %d", s.recv.Released(), s.recv.Accepted(), s.creditWant, pos)
	}
}

// queuedStream returns a stream that received n tcp/data messages (of
// 100, 101, … bytes) and tcp/eof, none read yet; the bytes, and the
// position of the stream's end.
func queuedStream(t *testing.T, n int) (s *TCPStream, data []byte, end int64) {
	t.Helper()
	limits := flow.ReceiveLimits{WindowBytes: 16 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10}
	s = &TCPStream{changed: make(chan struct{}), readable: make(chan struct{}), recv: flow.NewReceiver(limits)}
	for i := range n {
		chunk := []byte(strings.Repeat(string(rune('a'+i%26)), 100+i))
		msg, _ := appendTCPInput(nil, int64(len(data)), chunk)
		m := strings.Replace(string(msg), "tcp/input", "tcp/data", 1)
		if err := feed(s, int64(i+1), m); err != nil {
			t.Fatal(err)
		}
		end += flow.UTF16Len(m)
		data = append(data, chunk...)
	}
	eof := fmt.Sprintf(`{"jsonrpc":"2.0","method":"tcp/eof","params":{"offset":%d}}`, len(data))
	if err := feed(s, int64(n+1), eof); err != nil {
		t.Fatal(err)
	}
	return s, data, end + flow.UTF16Len(eof)
}

// discardCounter takes every write and counts the bytes.
type discardCounter struct{ n int64 }

func (d *discardCounter) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	return len(p), nil
}

// TestTCPWriteToAllocs: WriteTo allocates nothing per write: 200 queued
// messages (25 writes of 8) cost as many allocations as 8 (one write).
func TestTCPWriteToAllocs(t *testing.T) {
	mallocs := func(n int) uint64 {
		s, data, _ := queuedStream(t, n)
		var w discardCounter
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := s.WriteTo(&w)
		runtime.ReadMemStats(&after)
		if err != nil || got != int64(len(data)) || w.n != got {
			t.Fatalf("WriteTo of %d messages = %d, %v; want %d bytes", n, got, err, len(data))
		}
		return after.Mallocs - before.Mallocs
	}
	few, many := mallocs(8), mallocs(200)
	if many > few+4 {
		t.Errorf("WriteTo: %d allocations for 200 messages, %d for 8: it allocates per write", many, few)
	}
}

type onlyReader struct{ io.Reader }

// feed passes msg to s as the host sends it: one frame through the
// stream's receiver.
func feed(s *TCPStream, id int64, msg string) error {
	var fr flow.Fragmenter
	if err := fr.Reset("ahp-tcp:/1", "s1", id, msg, 64<<10); err != nil {
		return err
	}
	frame, _, _ := fr.Next(nil)
	var f flow.Frame
	if err := flow.DecodeFrame(frame, &f); err != nil {
		return err
	}
	text, end, err := s.recv.Frame(flow.UTF16Len(string(frame)), &f)
	if err != nil || text == nil {
		return fmt.Errorf("frame: %v (complete: %v)", err, text != nil)
	}
	return s.receiveLocked(text, end)
}

// TestAutoReceive: the window is the round trip × AutoWindowRate, rounded
// up to 64 KiB, within [AutoWindowMin, AutoWindowMax]; the rest is
// WithWindow's (TestWithWindow).
func TestAutoReceive(t *testing.T) {
	def := flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}
	maxi := flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 16 << 20}
	for _, c := range []struct {
		name       string
		rtt        time.Duration
		wantWindow int64
	}{
		{"no round trip", 0, AutoWindowMin},
		{"loopback", 200 * time.Microsecond, AutoWindowMin},
		{"LAN", 500 * time.Microsecond, AutoWindowMin},
		{"1 ms", time.Millisecond, AutoWindowMin},          // 384 KiB: below the floor
		{"1.5 ms", 1500 * time.Microsecond, 10 * 64 << 10}, // 590 KiB, rounded up to 640
		{"10 ms", 10 * time.Millisecond, 62 * 64 << 10},    // 4.03 MB, rounded up to 64 KiB
		{"20 ms", 20 * time.Millisecond, 123 * 64 << 10},
		{"50 ms", 50 * time.Millisecond, AutoWindowMax},
		{"a second", time.Second, AutoWindowMax},
	} {
		if got := AutoReceive(def, maxi, c.rtt); got.WindowBytes != c.wantWindow {
			t.Errorf("%s: window %d, want %d", c.name, got.WindowBytes, c.wantWindow)
		}
	}
}

// TestWithWindow: the host's default frame and message sizes with the
// window asked for, lowered to the host's maximum and raised to one frame;
// zero limits (the host's defaults) when the host stated no valid
// defaults.
func TestWithWindow(t *testing.T) {
	def := flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}
	maxi := flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 16 << 20}
	for _, c := range []struct {
		name       string
		def, maxi  flow.ReceiveLimits
		w          int64
		wantWindow int64
	}{
		{"as asked", def, maxi, 3 << 20, 3 << 20},
		{"below the default", def, maxi, 256 << 10, 256 << 10},
		{"host maximum below", def, flow.ReceiveLimits{WindowBytes: 4 << 20}, 16 << 20, 4 << 20},
		{"no host maximum", def, flow.ReceiveLimits{}, 128 << 20, 128 << 20},
		{"below a frame", def, maxi, 2 << 10, 64 << 10},
		{"frames above the window", flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 1 << 20}, maxi, 512 << 10, 1 << 20},
		{"no defaults stated", flow.ReceiveLimits{}, maxi, 4 << 20, 0},
		{"invalid defaults", flow.ReceiveLimits{WindowBytes: 1 << 20}, maxi, 4 << 20, 0},
	} {
		got := WithWindow(c.def, c.maxi, c.w)
		if c.wantWindow == 0 {
			if got != (flow.ReceiveLimits{}) {
				t.Errorf("%s: %+v, want zero limits", c.name, got)
			}
			continue
		}
		if got.WindowBytes != c.wantWindow {
			t.Errorf("%s: window %d, want %d", c.name, got.WindowBytes, c.wantWindow)
		}
		if err := got.Validate(); err != nil || got.MaximumFrameBytes != c.def.MaximumFrameBytes || got.MaximumMessageBytes != c.def.MaximumMessageBytes {
			t.Errorf("%s: %+v (%v): want the defaults' frame and message sizes", c.name, got, err)
		}
	}
}

// BenchmarkParseTCPData: the params of a tcp/data of 24 KiB, the size of
// a forward download's messages with a 256 KiB window (a quarter of it).
func BenchmarkParseTCPData(b *testing.B) {
	data := make([]byte, 24<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	params := []byte(`{"offset":123456789,"data":"` + base64.StdEncoding.EncodeToString(data) + `"}`)
	buf := make([]byte, 0, len(data))
	b.SetBytes(int64(len(params)))
	for b.Loop() {
		_, got, err := parseTCPData(buf, params)
		if err != nil || len(got) != len(data) {
			b.Fatal(len(got), err)
		}
	}
}

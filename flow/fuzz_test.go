package flow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// Fuzz targets. Seeds come from the table tests; more seeds are committed
// under testdata/fuzz/. Run one with e.g.
//
//	go test -run '^$' -fuzz '^FuzzFragmentRoundTrip$' -fuzztime 10s ./flow/

func FuzzFragmentRoundTrip(f *testing.F) {
	for i, s := range sizeCases {
		f.Add(s, "ahp-terminal:/t", "s1", int64(i+1), int64(1024+i))
	}
	f.Add(strings.Repeat("😀", 600), "c", "s", int64(1), int64(1024))
	f.Add(strings.Repeat("\x1b", 700), "日本", "\"", int64(flow.MaxSafeInteger), int64(1030))
	f.Add(strings.Repeat("a\xff", 900), strings.Repeat("c", 400), "s", int64(77), int64(2000))
	f.Fuzz(func(t *testing.T, msg, channel, sub string, id, maxFrame int64) {
		if id <= 0 || id > flow.MaxSafeInteger {
			id = 1 + (id&(1<<62-1))%flow.MaxSafeInteger
		}
		maxFrame = 1024 + (maxFrame&(1<<62-1))%(64<<10)
		var fr flow.Fragmenter
		if err := fr.Reset(channel, sub, id, msg, maxFrame); err != nil {
			if !errors.Is(err, flow.ErrEnvelopeTooLarge) {
				t.Fatalf("Reset = %v", err)
			}
			// Legitimate only when the envelope leaves less than one
			// costliest character (12 bytes).
			env := flow.UTF16Len(`{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":,"subscriptionId":,"messageId":,"data":"","final":true}}`) +
				flow.EscapedLen(channel) + flow.EscapedLen(sub) + 8 + 2*int64(len(stringsItoa(id)))
			if env+12 <= maxFrame {
				t.Fatalf("ErrEnvelopeTooLarge with an envelope of %d bytes under %d", env, maxFrame)
			}
			return
		}
		frames := fragmentAll(t, channel, sub, id, msg, maxFrame)
		// The receiver takes them (window ≥ message, one message).
		size := max(flow.UTF16Len(msg), maxFrame)
		r := flow.NewReceiver(limits(size, maxFrame, size))
		var got []byte
		for _, b := range frames {
			var f flow.Frame
			if err := flow.DecodeFrame(b, &f); err != nil {
				t.Fatal(err)
			}
			f.MessageID = 1 // the receiver expects message 1
			m, _, err := r.Frame(flow.UTF16Len(string(b)), &f)
			if err != nil {
				if msg == "" && errors.Is(err, flow.ErrEmptyMessage) {
					return
				}
				t.Fatalf("Receiver.Frame = %v", err)
			}
			got = m
		}
		if string(got) != replaceInvalid(msg) {
			t.Fatalf("receiver reassembled %.100q, want %.100q", got, replaceInvalid(msg))
		}
	})
}

func stringsItoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func FuzzDecodeFrame(f *testing.F) {
	for _, tt := range decodeCases {
		if len(tt.in) < 4096 {
			f.Add([]byte(tt.in))
		}
	}
	for _, s := range sizeCases {
		var fr flow.Fragmenter
		_ = fr.Reset("c", "s", 3, s, 1024)
		b, _, _ := fr.Next(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr flow.Frame
		if err := flow.DecodeFrame(b, &fr); err != nil {
			for _, want := range []error{flow.ErrNotFrame, flow.ErrBadJSON, flow.ErrBadFrame} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("DecodeFrame = %v, not one of the documented errors", err)
		}
		if !json.Valid(b) {
			t.Fatalf("DecodeFrame accepted %q, which encoding/json rejects", b)
		}
		if fr.MessageID <= 0 || fr.MessageID > flow.MaxSafeInteger {
			t.Fatalf("MessageID %d out of range", fr.MessageID)
		}
		if got, want := fr.Size(b), flow.UTF16Len(string(b)); got != want {
			t.Fatalf("Size = %d, want UTF16Len %d", got, want)
		}
		data, n, err := fr.AppendData(nil)
		if err != nil {
			return
		}
		if n != flow.UTF16Len(string(data)) {
			t.Fatalf("AppendData size %d, want %d", n, flow.UTF16Len(string(data)))
		}
		// encoding/json agrees on the data.
		var jf jsonFrame
		if err := json.Unmarshal(b, &jf); err == nil && jf.Params.Data != string(data) && !hasDuplicateKeys(b) {
			t.Fatalf("data %q, encoding/json says %q", data, jf.Params.Data)
		}
		// Re-encoding round-trips.
		var frag flow.Fragmenter
		if err := frag.Reset(fr.Channel, fr.SubscriptionID, fr.MessageID, string(data), flow.MaxSafeInteger); err != nil {
			t.Fatal(err)
		}
		out, _, _ := frag.Next(nil)
		var fr2 flow.Frame
		if err := flow.DecodeFrame(out, &fr2); err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", out, err)
		}
		data2, err := fr2.Data()
		if err != nil || data2 != string(data) || fr2.Channel != fr.Channel || fr2.SubscriptionID != fr.SubscriptionID || fr2.MessageID != fr.MessageID {
			t.Fatalf("round trip: %+v %q, want %+v %q (%v)", fr2, data2, fr, data, err)
		}
	})
}

// hasDuplicateKeys is a crude check for inputs where encoding/json (last
// key wins) and DecodeFrame (first params wins) may legitimately differ.
func hasDuplicateKeys(b []byte) bool {
	s := string(b)
	for _, k := range []string{`"data"`, `"params"`, `"method"`} {
		if strings.Count(s, k) > 1 {
			return true
		}
	}
	return strings.Contains(s, `\u`) // escaped keys are not acted on
}

// FuzzCreditLedger drives a SendWindow with arbitrary starts, reservations
// and credits. Invariants after every step: sent ≥ consumed; outstanding <
// window + maxMessage + lifecycle allowance; the ledger bound; a refused
// credit changes nothing; nothing panics.
func FuzzCreditLedger(f *testing.F) {
	f.Add([]byte{0, 10, 2, 10, 3, 4, 0}, int64(4096), int64(2048))
	f.Add([]byte{0, 255, 2, 255, 3, 0, 1, 2, 1, 3, 5, 7, 6, 4, 1}, int64(1024), int64(1024))
	f.Add([]byte{1, 1, 2, 1, 3, 1, 1, 2, 1, 3, 1, 1, 2, 1, 3, 1, 1, 2, 1, 3, 1, 1, 2, 1, 3}, int64(1024), int64(1024))
	f.Fuzz(func(t *testing.T, ops []byte, window, maxMsg int64) {
		window = 1024 + (window&(1<<62-1))%(1<<20)
		maxMsg = 1024 + (maxMsg&(1<<62-1))%(1<<20)
		l := limits(window, 1024, maxMsg)
		w := flow.NewSendWindow(l)
		var ends []int64 // uncredited boundaries, as the test knows them
		var msgEnd int64
		lifecycle := int64(flow.MaxLifecycleMessages * flow.MaxLifecycleBytes)
		ledgerMax := int((window+maxMsg)/2 + 1)
		arg := func(i int) int64 {
			if i < len(ops) {
				return int64(ops[i])
			}
			return 1
		}
		for i := 0; i < len(ops); i += 2 {
			a := arg(i + 1)
			switch ops[i] % 7 {
			case 0, 1: // start data or lifecycle of size 2a·(some scale)
				class := flow.Class(ops[i] % 2)
				size := 2 * a * (1 + a%64)
				if ops[i]%14 == 7 {
					size = maxMsg // large
				}
				before := snapshot(w)
				err := w.Start(size, class)
				if err != nil {
					if snapshot(w) != before {
						t.Fatalf("refused Start changed the window")
					}
					break
				}
				msgEnd = w.Sent() + size
				ends = append(ends, msgEnd)
			case 2: // reserve part of the active message
				if w.Active() {
					w.Reserve(min(msgEnd-w.Sent(), 2*a+1))
				}
			case 3: // finish when fully reserved
				if w.Active() {
					w.Reserve(msgEnd - w.Sent())
					w.Finish()
				}
			case 4: // credit a known boundary that has been sent
				var c int64 = -1
				for k := len(ends) - 1; k >= 0; k-- {
					if ends[k] <= w.Sent() && int64(k)%(a+1) == 0 {
						c = ends[k]
						break
					}
				}
				if c < 0 {
					break
				}
				if adv, err := w.Credit(c); err != nil || !adv {
					t.Fatalf("Credit(%d) of a sent boundary = %v, %v", c, adv, err)
				}
				for len(ends) > 0 && ends[0] <= c {
					ends = ends[1:]
				}
			case 5, 6: // arbitrary credit
				c := w.Consumed() + (a-64)*int64(1+ops[i]%3)*7
				before := snapshot(w)
				adv, err := w.Credit(c)
				switch {
				case err != nil:
					if snapshot(w) != before {
						t.Fatalf("refused Credit(%d) changed the window", c)
					}
					if !errors.Is(err, flow.ErrCreditBeyondSent) && !errors.Is(err, flow.ErrCreditOffBoundary) {
						t.Fatalf("Credit(%d) = %v", c, err)
					}
				case adv:
					for len(ends) > 0 && ends[0] <= c {
						ends = ends[1:]
					}
					if w.Consumed() != c {
						t.Fatalf("Credit(%d) advanced to %d", c, w.Consumed())
					}
				case c > before.consumed:
					t.Fatalf("Credit(%d) above consumed %d ignored", c, before.consumed)
				}
			}
			if w.Sent() < w.Consumed() {
				t.Fatalf("sent %d < consumed %d", w.Sent(), w.Consumed())
			}
			if o := w.Outstanding(); o >= window+maxMsg+lifecycle {
				t.Fatalf("outstanding %d ≥ window %d + maxMessage %d + lifecycle", o, window, maxMsg)
			}
			if n := flow.LedgerLen(w); n > ledgerMax || n != len(ends) {
				t.Fatalf("ledger %d entries (test knows %d), bound %d", n, len(ends), ledgerMax)
			}
		}
	})
}

// FuzzReceiver feeds a Receiver arbitrary frame sequences (ids, sizes,
// finals, payloads, releases, discards). It never panics, refuses with the
// documented errors, and its memory stays within the bound.
func FuzzReceiver(f *testing.F) {
	f.Add([]byte("\x00hello\x01world\x04\x02\x03"), int64(1024), int64(1024), int64(1024))
	f.Add([]byte(strings.Repeat("\x01\xff\x00😀\x05", 200)), int64(4096), int64(1024), int64(2048))
	f.Add([]byte(strings.Repeat("\x01aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 100)), int64(1024), int64(1024), int64(1024))
	f.Fuzz(func(t *testing.T, in []byte, window, frame, message int64) {
		frame = 1024 + (frame&(1<<62-1))%8192
		window = frame + (window&(1<<62-1))%(64<<10)
		message = frame + (message&(1<<62-1))%(32<<10)
		l := limits(window, frame, message)
		r := flow.NewReceiver(l)
		var fr flow.Fragmenter
		var ends []flow.Position
		lifecycle := int64(flow.MaxLifecycleMessages * flow.MaxLifecycleBytes)
		for len(in) > 0 {
			op := in[0]
			in = in[1:]
			n := int(op>>3) * 8
			n = min(n, len(in))
			chunk := string(in[:n])
			in = in[n:]
			switch op % 6 {
			case 0, 1, 2: // a frame: id next / same / off by one, final by op bit
				id := r.Accepted().MessageID + 1 + int64(op%3) - 1
				if id < 1 {
					id = 1
				}
				if err := fr.Reset("c", "s", id, chunk, 1<<40); err != nil {
					t.Fatal(err)
				}
				text, _, _ := fr.Next(nil)
				var f flow.Frame
				if err := flow.DecodeFrame(text, &f); err != nil {
					t.Fatal(err)
				}
				f.Final = op&0x40 != 0
				_, end, err := r.Frame(flow.UTF16Len(string(text)), &f)
				if err != nil {
					for _, want := range []error{flow.ErrFrameTooLarge, flow.ErrMessageTooLarge, flow.ErrWindowExceeded, flow.ErrMessageID, flow.ErrEmptyMessage} {
						if errors.Is(err, want) {
							return // the subscription is reset
						}
					}
					t.Fatalf("Frame = %v", err)
				}
				if end.MessageID != 0 {
					ends = append(ends, end)
				}
			case 3: // a raw text frame
				var f flow.Frame
				if err := flow.DecodeFrame([]byte(chunk), &f); err == nil {
					if _, _, err := r.Frame(flow.UTF16Len(chunk), &f); err != nil {
						return
					}
				}
			case 4: // release some
				if len(ends) > 0 {
					k := int(op>>3) % len(ends)
					if _, _, err := r.Release(ends[k]); err != nil {
						t.Fatalf("Release(%+v) = %v", ends[k], err)
					}
					ends = ends[k+1:]
				}
			case 5:
				if op&0x40 != 0 {
					r.Resume()
				} else {
					r.DiscardPartial()
				}
			}
			if c, bound := flow.ReceiverBufCap(r), receiverBufBound(l); c > bound {
				t.Fatalf("buffer capacity %d > bound %d", c, bound)
			}
			if o := flow.ReceiverReceived(r) - r.Announced(); o >= window+message+lifecycle {
				t.Fatalf("received − announced = %d ≥ window + maxMessage + lifecycle", o)
			}
		}
	})
}

// FuzzNotifications: channel/credit and channel/reset are valid UTF-8 and
// valid JSON for any ids, code and message, and encoding/json reads back
// exactly what was encoded (invalid UTF-8 bytes as U+FFFD).
func FuzzNotifications(f *testing.F) {
	for i, s := range sizeCases {
		f.Add(s, "s1", flow.CodeProtocolError, sizeCases[(i+1)%len(sizeCases)], int64(i)*1024)
	}
	f.Add("ahp-terminal:/t1", "s1", flow.CodeInvalidCredit, "flow: credit beyond the bytes sent: 10 > 4", int64(flow.MaxSafeInteger))
	f.Add("", "", "", "", int64(-1))
	f.Fuzz(func(t *testing.T, channel, sub, code, message string, consumed int64) {
		checkCredit(t, flow.AppendCredit(nil, channel, sub, consumed), channel, sub, consumed)
		checkReset(t, flow.AppendReset(nil, channel, sub, code, message), channel, sub, code, message)
	})
}

// FuzzEscapedPrefix: EscapedPrefix cuts at a character, within the
// budget, and as late as the budget allows.
func FuzzEscapedPrefix(f *testing.F) {
	for i, s := range sizeCases {
		f.Add(s, int64(i))
	}
	f.Add(strings.Repeat("a\x01", 40), int64(61))
	f.Fuzz(func(t *testing.T, s string, budget int64) {
		budget = (budget&(1<<62-1))%(flow.EscapedLen(s)+16) - 2
		checkEscapedPrefix(t, s, budget)
	})
}

// FuzzFragmentEscaped: a message given as its escaped body (ASCII data)
// makes the frames its text makes, byte for byte, and AppendEscapedTwice
// is AppendEscaped twice.
func FuzzFragmentEscaped(f *testing.F) {
	f.Add("total 48\r\n\"a\"\\b\x1b[0m", int64(300), int64(1<<20))
	f.Add(strings.Repeat(`\"`, 500), int64(301), int64(333))
	f.Add(strings.Repeat("\x00", 300), int64(1031), int64(1024))
	f.Fuzz(func(t *testing.T, data string, maxFrame, room int64) {
		b := []byte(data)
		for i := range b {
			b[i] &= 0x7f // ASCII
		}
		data = string(b)
		maxFrame = 300 + (maxFrame&(1<<62-1))%(8<<10)
		room = 300 + (room&(1<<62-1))%(16<<10)
		checkEscapedFrames(t, data, maxFrame, room)
		checkEscapedTwicePrefix(t, data, room%(4*int64(len(data))+16))
		got, n16, ascii := flow.AppendEscapedTwice(nil, data)
		if want := flow.AppendEscaped(nil, string(flow.AppendEscaped(nil, data))); string(got) != string(want) || n16 != flow.EscapedLen(data) || !ascii {
			t.Fatalf("AppendEscapedTwice(%q) = %q, %d, %v", data, got, n16, ascii)
		}
	})
}

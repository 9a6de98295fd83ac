package flow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// Benchmarks of the frame codec hot path (issue 2). Each fragments or
// decodes a 1 MiB logical message under maximumFrameBytes = 16 KiB (UTF-16
// bytes of the whole frame); MB/s is of the message's UTF-8 bytes. The
// encoding/json variants do the same work with json.Marshal/Unmarshal of
// an equivalent struct, one per frame, for comparison.
//
//	go test -run '^$' -bench . -benchmem ./flow/

const benchFrame = 16 << 10

func benchText(kind string) string {
	const size = 1 << 20
	var unit string
	switch kind {
	case "ascii":
		unit = "The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ. "
	case "json":
		// A serialized logical message inside a logical message: many
		// quotes and backslashes.
		unit = notification("terminal/output", `{"k":"v \"q\" \\ path\\to\\file","n":[1,2,3]}`) + ","
	case "cjk":
		unit = "日本語のテキストと絵文字😀👍、中文字符和한국어 텍스트。"
	case "term":
		unit = "\x1b[1;32muser@host\x1b[0m:\x1b[1;34m~/src\x1b[0m$ ls -la\r\n" +
			"drwxr-xr-x  5 user user 4096 Jan  1 12:00 \x1b[01;34m.\x1b[0m\r\n" +
			"-rw-r--r--  1 user user  220 Jan  1 12:00 .bashrc\r\n"
	}
	return strings.Repeat(unit, size/len(unit)+1)[:size-size%len(unit)]
}

var benchKinds = []string{"ascii", "json", "cjk", "term"}

// benchFrames fragments the text once and returns the frames and the data
// chunk of each.
func benchFrames(b *testing.B, text string) (frames [][]byte, chunks []string) {
	var f flow.Fragmenter
	if err := f.Reset("ahp-terminal:/t1", "sub-1", 1, text, benchFrame); err != nil {
		b.Fatal(err)
	}
	for !f.Done() {
		fr, _, _ := f.Next(nil)
		frames = append(frames, fr)
		var d flow.Frame
		if err := flow.DecodeFrame(fr, &d); err != nil {
			b.Fatal(err)
		}
		s, _ := d.Data()
		chunks = append(chunks, s)
	}
	return frames, chunks
}

func BenchmarkFragment(b *testing.B) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			frames, _ := benchFrames(b, text)
			var f flow.Fragmenter
			buf := make([]byte, 0, 2*benchFrame)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f.Reset("ahp-terminal:/t1", "sub-1", 1, text, benchFrame); err != nil {
					b.Fatal(err)
				}
				for !f.Done() {
					buf, _, _ = f.Next(buf[:0])
				}
			}
			b.ReportMetric(float64(len(frames)), "frames/op")
		})
	}
}

// BenchmarkFragmentEscaped fragments a terminal/output message of 1 MiB of
// terminal output given as text (Reset) and as its escaped body
// (ResetEscaped, Message.Escaped): the same frames, without the pass
// that escapes each. MB/s is of the output's bytes.
func BenchmarkFragmentEscaped(b *testing.B) {
	for _, kind := range []string{"ascii", "term"} {
		data := benchText(kind)
		text := notification("terminal/output", data)
		esc := string(flow.AppendEscaped(nil, text))
		for _, mode := range []string{"text", "escaped"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				var f flow.Fragmenter
				buf := make([]byte, 0, 2*benchFrame)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if mode == "text" {
						err = f.Reset("ahp-terminal:/t1", "sub-1", 1, text, benchFrame)
					} else {
						err = f.ResetEscaped("ahp-terminal:/t1", "sub-1", 1, esc, benchFrame)
					}
					if err != nil {
						b.Fatal(err)
					}
					for !f.Done() {
						buf, _, _ = f.Next(buf[:0])
					}
				}
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			frames, _ := benchFrames(b, text)
			buf := make([]byte, 0, 2*len(text))
			var f flow.Frame
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:0]
				for _, fr := range frames {
					if err := flow.DecodeFrame(fr, &f); err != nil {
						b.Fatal(err)
					}
					var err error
					if buf, _, err = f.AppendData(buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			if string(buf) != text {
				b.Fatal("reassembly differs")
			}
			b.ReportMetric(float64(len(frames)), "frames/op")
		})
	}
}

// BenchmarkReceive is DecodeFrame plus Receiver.Frame (reassembly with the
// limit checks), the whole receive path but the frame's size, which the
// caller measures.
func BenchmarkReceive(b *testing.B) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			frames, _ := benchFrames(b, text)
			sizes := make([]int64, len(frames))
			for i, fr := range frames {
				sizes[i] = flow.UTF16Len(string(fr))
			}
			l := limits(4<<20, benchFrame, 4<<20)
			var f flow.Frame
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			r := flow.NewReceiver(l)
			for b.Loop() {
				id := r.Accepted().MessageID + 1
				for i, fr := range frames {
					if err := flow.DecodeFrame(fr, &f); err != nil {
						b.Fatal(err)
					}
					f.MessageID = id // the same frames, as the next message
					_, end, err := r.Frame(sizes[i], &f)
					if err != nil {
						b.Fatal(err)
					}
					if f.Final {
						if _, _, err := r.Release(end); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

type benchJSONFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  benchJSONParams `json:"params"`
}

type benchJSONParams struct {
	Channel        string `json:"channel"`
	SubscriptionID string `json:"subscriptionId"`
	MessageID      int64  `json:"messageId"`
	Data           string `json:"data"`
	Final          bool   `json:"final,omitempty"`
}

// BenchmarkJSONMarshal encodes the same frames with encoding/json (HTML
// escaping on, as json.Marshal does).
func BenchmarkJSONMarshal(b *testing.B) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			_, chunks := benchFrames(b, text)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				for i, c := range chunks {
					fr := benchJSONFrame{"2.0", "channel/frame", benchJSONParams{"ahp-terminal:/t1", "sub-1", 1, c, i == len(chunks)-1}}
					if _, err := json.Marshal(&fr); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkJSONUnmarshal decodes the same frames with encoding/json and
// concatenates the data.
func BenchmarkJSONUnmarshal(b *testing.B) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			frames, _ := benchFrames(b, text)
			buf := make([]byte, 0, 2*len(text))
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:0]
				for _, fr := range frames {
					var f benchJSONFrame
					if err := json.Unmarshal(fr, &f); err != nil {
						b.Fatal(err)
					}
					buf = append(buf, f.Params.Data...)
				}
			}
		})
	}
}

// benchPerKind runs f over the text of each kind as a sub-benchmark,
// reporting MB/s of the text's bytes.
func benchPerKind(b *testing.B, f func(text string)) {
	for _, kind := range benchKinds {
		text := benchText(kind)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				f(text)
			}
		})
	}
}

func BenchmarkUTF16Len(b *testing.B) {
	benchPerKind(b, func(text string) { flow.UTF16Len(text) })
}

// BenchmarkEscapedPrefix cuts the text into pieces whose escaped bodies
// fit 64 KiB, the way a terminal viewer fills its messages.
func BenchmarkEscapedPrefix(b *testing.B) {
	benchPerKind(b, func(text string) {
		for off := 0; off < len(text); {
			n, _ := flow.EscapedPrefix(text[off:], 64<<10)
			off += n
		}
	})
}

package flow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

type decodeCase struct {
	name    string
	in      string
	wantErr error // nil: decodes
	want    flow.Frame
	data    string
	dataErr error // error of Data()
}

var decodeCases = []decodeCase{
	{name: "canonical",
		in:   `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":"abc","final":true}}`,
		want: flow.Frame{Channel: "c", SubscriptionID: "s", MessageID: 1, Final: true}, data: "abc"},
	{name: "params first, keys reordered, whitespace",
		in:   " \n{ \"params\" : { \"final\" : false , \"data\" : \"x\" , \"messageId\" : 9007199254740991 , \"subscriptionId\" : \"s\" , \"channel\" : \"c\" } ,\t\"method\" : \"channel/frame\" , \"jsonrpc\" : \"2.0\" }\r\n",
		want: flow.Frame{Channel: "c", SubscriptionID: "s", MessageID: 1<<53 - 1}, data: "x"},
	{name: "unknown keys skipped",
		in:   `{"x":[1,{"a":[true,false,null,-1.5e3]}],"jsonrpc":"2.0","method":"channel/frame","params":{"extra":{"deep":["\"]"]},"channel":"c","subscriptionId":"s","messageId":2,"data":""},"z":null}`,
		want: flow.Frame{Channel: "c", SubscriptionID: "s", MessageID: 2}, data: ""},
	{name: "escapes",
		in:   `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c\u0041\/","subscriptionId":"s\"","messageId":3,"data":"\"\\\/\b\f\n\r\t\u001b\u00e9\uD83D\uDE00\ud83d\ude00\uFFFD"}}`,
		want: flow.Frame{Channel: "cA/", SubscriptionID: `s"`, MessageID: 3}, data: "\"\\/\b\f\n\r\t\x1bé😀😀\uFFFD"},
	{name: "raw non-ascii", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"日","subscriptionId":"s","messageId":3,"data":"日本😀"}}`,
		want: flow.Frame{Channel: "日", SubscriptionID: "s", MessageID: 3}, data: "日本😀"},
	{name: "lone high surrogate in data", in: frameWithData(`\ud83d`), want: frameWant(), dataErr: flow.ErrSurrogate},
	{name: "lone high surrogate then text", in: frameWithData(`\ud83dabcdefg`), want: frameWant(), dataErr: flow.ErrSurrogate},
	{name: "lone low surrogate", in: frameWithData(`\ude00x`), want: frameWant(), dataErr: flow.ErrSurrogate},
	{name: "high then non-low escape", in: frameWithData(`\ud83d\u0041`), want: frameWant(), dataErr: flow.ErrSurrogate},
	{name: "two highs", in: frameWithData(`\ud83d\ud83d`), want: frameWant(), dataErr: flow.ErrSurrogate},
	{name: "lone surrogate in channel", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"\ud800","subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrSurrogate},
	{name: "bad escape in data", in: frameWithData(`\x`), wantErr: flow.ErrBadJSON},
	{name: "bad hex in data", in: frameWithData(`\u12G4`), wantErr: flow.ErrBadJSON},
	{name: "short hex in data", in: frameWithData(`\u12`), wantErr: flow.ErrBadJSON},
	{name: "bad escape in unknown key", in: `{"x":"\q","jsonrpc":"2.0"}`, wantErr: flow.ErrBadJSON},
	{name: "invalid utf8 in data", in: frameWithData("a\xffb"), want: frameWant(), dataErr: flow.ErrBadFrame},
	{name: "invalid utf8 in escaped data", in: frameWithData("\\n\xffb"), want: frameWant(), dataErr: flow.ErrBadFrame},
	{name: "utf8 surrogate in data", in: frameWithData("\xed\xa0\x80"), want: frameWant(), dataErr: flow.ErrBadFrame},

	{name: "missing channel", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "missing sub", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","messageId":1,"data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "missing id", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "missing data", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1}}`, wantErr: flow.ErrBadFrame},
	{name: "missing params", in: `{"jsonrpc":"2.0","method":"channel/frame"}`, wantErr: flow.ErrBadFrame},
	{name: "params not object", in: `{"jsonrpc":"2.0","method":"channel/frame","params":[1]}`, wantErr: flow.ErrBadFrame},
	{name: "missing jsonrpc", in: `{"method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "wrong jsonrpc", in: `{"jsonrpc":"1.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "data not string", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":5}}`, wantErr: flow.ErrBadFrame},
	{name: "channel not string", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":1,"subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrBadFrame},
	{name: "final not bool", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":"","final":"true"}}`, wantErr: flow.ErrBadFrame},
	{name: "id zero", in: frameWithID("0"), wantErr: flow.ErrBadFrame},
	{name: "id negative", in: frameWithID("-1"), wantErr: flow.ErrBadFrame},
	{name: "id float", in: frameWithID("1.5"), wantErr: flow.ErrBadFrame},
	{name: "id float integral", in: frameWithID("1.0"), wantErr: flow.ErrBadFrame},
	{name: "id exponent", in: frameWithID("1e3"), wantErr: flow.ErrBadFrame},
	{name: "id 2^53", in: frameWithID("9007199254740992"), wantErr: flow.ErrBadFrame},
	{name: "id huge", in: frameWithID("123456789012345678901234567890"), wantErr: flow.ErrBadFrame},
	{name: "id string", in: frameWithID(`"1"`), wantErr: flow.ErrBadFrame},
	{name: "id leading zero", in: frameWithID("01"), wantErr: flow.ErrBadJSON},

	{name: "other method", in: `{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":10}}`, wantErr: flow.ErrNotFrame},
	{name: "request with id", in: `{"jsonrpc":"2.0","id":1,"method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrNotFrame},
	{name: "request with id last", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":""},"id":null}`, wantErr: flow.ErrNotFrame},
	{name: "response", in: `{"jsonrpc":"2.0","id":7,"result":{}}`, wantErr: flow.ErrNotFrame},
	{name: "method not string", in: `{"jsonrpc":"2.0","method":5,"params":{}}`, wantErr: flow.ErrNotFrame},
	{name: "empty object", in: `{}`, wantErr: flow.ErrNotFrame},

	{name: "empty", in: ``, wantErr: flow.ErrBadJSON},
	{name: "array", in: `[1]`, wantErr: flow.ErrBadJSON},
	{name: "truncated", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c"`, wantErr: flow.ErrBadJSON},
	{name: "trailing", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":""}}x`, wantErr: flow.ErrBadJSON},
	{name: "unterminated string", in: `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c,"subscriptionId":"s","messageId":1,"data":""}}`, wantErr: flow.ErrBadJSON},
	{name: "raw control char", in: frameWithData("a\nb"), wantErr: flow.ErrBadJSON},
	{name: "missing colon", in: `{"jsonrpc" "2.0"}`, wantErr: flow.ErrBadJSON},
	{name: "trailing comma", in: `{"jsonrpc":"2.0",}`, wantErr: flow.ErrBadJSON},
	{name: "bad literal", in: `{"x":tru,"jsonrpc":"2.0"}`, wantErr: flow.ErrBadJSON},
	{name: "bad number", in: `{"x":-,"jsonrpc":"2.0"}`, wantErr: flow.ErrBadJSON},
	{name: "bad number 2", in: `{"x":1.,"jsonrpc":"2.0"}`, wantErr: flow.ErrBadJSON},
	{name: "deep nesting", in: `{"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, wantErr: flow.ErrBadJSON},
	{name: "deep objects", in: `{"x":` + strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat("}", 65) + `}`, wantErr: flow.ErrBadJSON},
}

func frameWithData(data string) string {
	return `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":1,"data":"` + data + `"}}`
}

func frameWithID(id string) string {
	return `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s","messageId":` + id + `,"data":"x"}}`
}

func frameWant() flow.Frame { return flow.Frame{Channel: "c", SubscriptionID: "s", MessageID: 1} }

func TestDecodeFrame(t *testing.T) {
	for _, tt := range decodeCases {
		var f flow.Frame
		err := flow.DecodeFrame([]byte(tt.in), &f)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: DecodeFrame(%.120q) = %v, want %v", tt.name, tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: DecodeFrame(%.120q) = %v, want nil", tt.name, tt.in, err)
			continue
		}
		if f.Channel != tt.want.Channel || f.SubscriptionID != tt.want.SubscriptionID ||
			f.MessageID != tt.want.MessageID || f.Final != tt.want.Final {
			t.Errorf("%s: DecodeFrame(%.120q) = %+v, want %+v", tt.name, tt.in, f, tt.want)
		}
		data, err := f.Data()
		if tt.dataErr != nil {
			if !errors.Is(err, tt.dataErr) {
				t.Errorf("%s: Data() = %q, %v; want %v", tt.name, data, err, tt.dataErr)
			}
			// AppendData leaves dst as it was on error.
			if out, n, _ := f.AppendData([]byte("keep")); string(out) != "keep" || n != 0 {
				t.Errorf("%s: AppendData on error = %q, %d; want dst unchanged", tt.name, out, n)
			}
			continue
		}
		if err != nil || data != tt.data {
			t.Errorf("%s: Data() = %q, %v; want %q", tt.name, data, err, tt.data)
		}
		out, n, err := f.AppendData([]byte("pre"))
		if err != nil || string(out) != "pre"+tt.data || n != flow.UTF16Len(tt.data) {
			t.Errorf("%s: AppendData = %q, %d, %v; want %q, %d", tt.name, out, n, err, "pre"+tt.data, flow.UTF16Len(tt.data))
		}
	}
}

// TestDecodeFrameAllocs: decoding a frame and appending its data to a
// reused buffer does not allocate in steady state.
func TestDecodeFrameAllocs(t *testing.T) {
	var fr flow.Fragmenter
	msg := strings.Repeat("x\"y\\z日😀", 1000)
	if err := fr.Reset("c", "s", 1, msg, 16<<10); err != nil {
		t.Fatal(err)
	}
	frame, _, _ := fr.Next(nil)
	buf := make([]byte, 0, 64<<10)
	var f flow.Frame
	allocs := testing.AllocsPerRun(100, func() {
		if err := flow.DecodeFrame(frame, &f); err != nil {
			t.Fatal(err)
		}
		var err error
		if buf, _, err = f.AppendData(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	// The Frame is reused for the same subscription: its Channel and
	// SubscriptionID strings are kept, so nothing is allocated.
	if allocs != 0 {
		t.Errorf("DecodeFrame+AppendData: %v allocs per frame, want 0", allocs)
	}
	// A different subscription gets its own strings.
	other := []byte(strings.Replace(string(frame), `"subscriptionId":"s"`, `"subscriptionId":"t"`, 1))
	if err := flow.DecodeFrame(other, &f); err != nil || f.SubscriptionID != "t" || f.Channel != "c" {
		t.Errorf("DecodeFrame(other) = %v, %+v", err, f)
	}
	if err := flow.DecodeFrame([]byte(`{"jsonrpc":"2.0","method":"channel/frame","params":{"messageId":1,"data":""}}`), &f); err == nil {
		t.Errorf("DecodeFrame without ids on a reused Frame succeeded: %+v", f)
	}
}

// A malformed frame after a valid one must not name the earlier frame's
// subscription (the daemon would reset the wrong one).
func TestDecodeFrameErrorClearsIDs(t *testing.T) {
	var f flow.Frame
	if err := flow.DecodeFrame([]byte(`{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"c","subscriptionId":"s1","messageId":1,"data":"x","final":true}}`), &f); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","method":"channel/frame"}`,
		`{"jsonrpc":"2.0","method":"channel/frame","params":[]}`,
		`{"jsonrpc":"2.0","method":"channel/frame","params":{"messageId":0,"subscriptionId":"s1"}}`,
	} {
		if err := flow.DecodeFrame([]byte(bad), &f); err == nil {
			t.Fatalf("DecodeFrame(%s) succeeded", bad)
		}
		if f.SubscriptionID != "" || f.Channel != "" {
			t.Errorf("DecodeFrame(%s) left ids %q %q", bad, f.Channel, f.SubscriptionID)
		}
	}
}

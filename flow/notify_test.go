package flow_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// wireNotification is channel/credit or channel/reset as encoding/json
// reads it.
type wireNotification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  struct {
		Channel        string  `json:"channel"`
		SubscriptionID string  `json:"subscriptionId"`
		ConsumedBytes  *int64  `json:"consumedBytes"`
		Code           *string `json:"code"`
		Message        *string `json:"message"`
	} `json:"params"`
}

// decodeNotification decodes b strictly: valid UTF-8, no member that
// wireNotification does not know, nothing after the object.
func decodeNotification(t testing.TB, b []byte) wireNotification {
	t.Helper()
	if !utf8.Valid(b) {
		t.Fatalf("%q is not valid UTF-8", b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var n wireNotification
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("encoding/json rejects %s: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("%s: trailing data", b)
	}
	return n
}

// The exact bytes on the wire: these are what flow's Sender, the ctl
// client and the daemon wrote before the encoders were shared.
func TestAppendCreditGolden(t *testing.T) {
	for _, tt := range []struct {
		dst           string
		channel, sub  string
		consumedBytes int64
		want          string
	}{
		{"", "ahp-terminal:/t1", "s1", 3600,
			`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"ahp-terminal:/t1","subscriptionId":"s1","consumedBytes":3600}}`},
		{"", "", "", 0,
			`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"","subscriptionId":"","consumedBytes":0}}`},
		{"x", "a\"b\\c", "\x01\n日\xff<&>", flow.MaxSafeInteger,
			`x{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"a\"b\\c","subscriptionId":"\u0001\n日` + "\uFFFD" + `<&>","consumedBytes":9007199254740991}}`},
		{"", "c", "s", -1, // written as it is: the misbehaving client of the tests
			`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":-1}}`},
	} {
		if got := flow.AppendCredit([]byte(tt.dst), tt.channel, tt.sub, tt.consumedBytes); string(got) != tt.want {
			t.Errorf("AppendCredit(%q, %q, %q, %d) =\n%s\nwant\n%s", tt.dst, tt.channel, tt.sub, tt.consumedBytes, got, tt.want)
		}
	}
}

func TestAppendResetGolden(t *testing.T) {
	for _, tt := range []struct {
		dst                         string
		channel, sub, code, message string
		want                        string
	}{
		{"", "ahp-tcp://db:5432", "s2", flow.CodeInvalidCredit, "flow: credit beyond the bytes sent: 10 > 4",
			`{"jsonrpc":"2.0","method":"channel/reset","params":{"channel":"ahp-tcp://db:5432","subscriptionId":"s2","code":"invalid-credit","message":"flow: credit beyond the bytes sent: 10 > 4"}}`},
		{"pre", "ahp-terminal:/t", "7", flow.CodeChannelClosed, "tab\there \"quoted\" \\ \x1f\x7f \u2028 😀 \xc3",
			`pre{"jsonrpc":"2.0","method":"channel/reset","params":{"channel":"ahp-terminal:/t","subscriptionId":"7","code":"channel-closed","message":"tab\there \"quoted\" \\ \u001f` + "\x7f \u2028 😀 \uFFFD" + `"}}`},
		{"", "", "", "", "",
			`{"jsonrpc":"2.0","method":"channel/reset","params":{"channel":"","subscriptionId":"","code":"","message":""}}`},
	} {
		if got := flow.AppendReset([]byte(tt.dst), tt.channel, tt.sub, tt.code, tt.message); string(got) != tt.want {
			t.Errorf("AppendReset(%q, %q, %q, %q, %q) =\n%s\nwant\n%s", tt.dst, tt.channel, tt.sub, tt.code, tt.message, got, tt.want)
		}
	}
}

// checkCredit checks that b is exactly one channel/credit carrying the
// given values as encoding/json reads them.
func checkCredit(t testing.TB, b []byte, channel, sub string, consumed int64) {
	t.Helper()
	n := decodeNotification(t, b)
	if n.JSONRPC != "2.0" || n.Method != "channel/credit" || n.Params.Code != nil || n.Params.Message != nil {
		t.Fatalf("%s: not a channel/credit", b)
	}
	if n.Params.Channel != replaceInvalid(channel) || n.Params.SubscriptionID != replaceInvalid(sub) {
		t.Fatalf("%s: channel %q subscriptionId %q, want %q %q", b, n.Params.Channel, n.Params.SubscriptionID, replaceInvalid(channel), replaceInvalid(sub))
	}
	if n.Params.ConsumedBytes == nil || *n.Params.ConsumedBytes != consumed {
		t.Fatalf("%s: consumedBytes %v, want %d", b, n.Params.ConsumedBytes, consumed)
	}
}

// checkReset is checkCredit for channel/reset.
func checkReset(t testing.TB, b []byte, channel, sub, code, message string) {
	t.Helper()
	n := decodeNotification(t, b)
	if n.JSONRPC != "2.0" || n.Method != "channel/reset" || n.Params.ConsumedBytes != nil || n.Params.Code == nil || n.Params.Message == nil {
		t.Fatalf("%s: not a channel/reset", b)
	}
	for _, f := range []struct{ name, got, want string }{
		{"channel", n.Params.Channel, channel},
		{"subscriptionId", n.Params.SubscriptionID, sub},
		{"code", *n.Params.Code, code},
		{"message", *n.Params.Message, message},
	} {
		if f.got != replaceInvalid(f.want) {
			t.Fatalf("%s: %s %q, want %q", b, f.name, f.got, replaceInvalid(f.want))
		}
	}
}

func TestNotificationsRoundTrip(t *testing.T) {
	for i, s := range sizeCases {
		other := sizeCases[(i+1)%len(sizeCases)]
		checkCredit(t, flow.AppendCredit(nil, s, other, int64(i)*1024), s, other, int64(i)*1024)
		checkReset(t, flow.AppendReset(nil, other, s, s, other), other, s, s, other)
	}
	// Appending keeps what dst holds, and into spare capacity.
	dst := make([]byte, 0, 4096)
	dst = append(dst, "keep"...)
	b := flow.AppendReset(dst, "c", "s", flow.CodeOverflow, "m")
	b = flow.AppendCredit(b, "c", "s", 42)
	head, rest, _ := bytes.Cut(b, []byte("}}"))
	if !bytes.HasPrefix(head, []byte("keep{")) {
		t.Fatalf("appended to %q: %q", "keep", b)
	}
	checkReset(t, append(head[len("keep"):], "}}"...), "c", "s", flow.CodeOverflow, "m")
	checkCredit(t, rest, "c", "s", 42)
}

func TestNotificationsNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		buf = flow.AppendCredit(buf[:0], "ahp-terminal:/t1", "s1", 123456)
		buf = flow.AppendReset(buf[:0], "ahp-terminal:/t1", "s1", flow.CodeProtocolError, "bad \"frame\"")
	}); n != 0 {
		t.Errorf("AppendCredit+AppendReset into a large enough buffer allocate %v times, want 0", n)
	}
}

// TestParseCredit: what AppendCredit writes parses back; near misses are
// left to encoding/json.
func TestParseCredit(t *testing.T) {
	for _, c := range []struct {
		ch, sub  string
		consumed int64
	}{{"ahp-term:/main", "s1", 0}, {"ahp-tcp:/3f2a", "s12", 1 << 40}, {"", "", 9_007_199_254_740_991}} {
		ch, sub, n, ok := flow.ParseCredit(flow.AppendCredit(nil, c.ch, c.sub, c.consumed))
		if !ok || string(ch) != c.ch || string(sub) != c.sub || n != c.consumed {
			t.Errorf("ParseCredit(AppendCredit(%q, %q, %d)) = %q, %q, %d, %v", c.ch, c.sub, c.consumed, ch, sub, n, ok)
		}
	}
	for _, in := range []string{
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":-1}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":01}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":1.0}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":12345678901234567}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c\\"","subscriptionId":"s","consumedBytes":1}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"é","consumedBytes":1}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"subscriptionId":"s","channel":"c","consumedBytes":1}}`,
		`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":1}} `,
		`{"jsonrpc":"2.0","id":1,"method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":1}}`,
	} {
		if _, _, _, ok := flow.ParseCredit([]byte(in)); ok {
			t.Errorf("ParseCredit(%s) took it", in)
		}
	}
}

// FuzzParseCredit: whatever ParseCredit takes, encoding/json reads as a
// channel/credit notification with the same values.
func FuzzParseCredit(f *testing.F) {
	f.Add(flow.AppendCredit(nil, "ahp-term:/main", "s1", 65536))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"c","subscriptionId":"s","consumedBytes":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ch, sub, n, ok := flow.ParseCredit(b)
		if !ok {
			return
		}
		var m struct {
			JSONRPC string           `json:"jsonrpc"`
			ID      *json.RawMessage `json:"id"`
			Method  string           `json:"method"`
			Params  struct {
				Channel        *string `json:"channel"`
				SubscriptionID *string `json:"subscriptionId"`
				ConsumedBytes  *int64  `json:"consumedBytes"`
			} `json:"params"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("ParseCredit took %q, which encoding/json refuses: %v", b, err)
		}
		p := m.Params
		if m.JSONRPC != "2.0" || m.ID != nil || m.Method != "channel/credit" || p.Channel == nil || *p.Channel != string(ch) ||
			p.SubscriptionID == nil || *p.SubscriptionID != string(sub) || p.ConsumedBytes == nil || *p.ConsumedBytes != n {
			t.Fatalf("ParseCredit(%q) = %q, %q, %d; encoding/json reads %+v", b, ch, sub, n, m)
		}
	})
}

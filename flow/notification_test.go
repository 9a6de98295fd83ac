package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

func TestDecodeNotification(t *testing.T) {
	for _, tc := range []struct {
		in, method, params string
		err                error
	}{
		{in: `{"jsonrpc":"2.0","method":"tcp/input","params":{"offset":0,"data":"AA=="}}`, method: "tcp/input", params: `{"offset":0,"data":"AA=="}`},
		{in: ` { "params" : [1, {"a":null}] , "method":"x\/y", "jsonrpc":"2\u002e0" } `, method: "x/y", params: `[1, {"a":null}]`},
		{in: `{"jsonrpc":"2.0","method":"m"}`, method: "m"},
		{in: `{"jsonrpc":"2.0","method":"m","id":1}`, err: ErrNotNotification},
		{in: `{"jsonrpc":"1.0","method":"m"}`, err: ErrNotNotification},
		{in: `{"jsonrpc":"2.0","method":7}`, err: ErrNotNotification},
		{in: `{"jsonrpc":"2.0","method":""}`, err: ErrNotNotification},
		{in: `{"jsonrpc":"2.0"}`, err: ErrNotNotification},
		{in: `{"jsonrpc":"2.0","method":"m","params":{}}}`, err: ErrBadJSON},
		{in: `{"jsonrpc":"2.0","method":"m","params":{"a":01}}`, err: ErrBadJSON},
		{in: `{"jsonrpc":"2.0","method":"m","params":"\x"}`, err: ErrBadJSON},
		{in: `[]`, err: ErrBadJSON},
		{in: ``, err: ErrBadJSON},
	} {
		m, p, err := DecodeNotification([]byte(tc.in))
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || m != tc.method || string(p) != tc.params {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.in, m, p, err, tc.method, tc.params)
		}
	}
}

// FuzzDecodeNotification checks DecodeNotification against encoding/json:
// what it accepts is valid JSON with the same method and params, and every
// valid notification (exact keys, valid UTF-8) is accepted.
func FuzzDecodeNotification(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"tcp/input","params":{"offset":0,"data":"AA=="}}`,
		`{"jsonrpc":"2.0","method":"terminal/input","params":{"data":"\u00e9\n"}}`,
		`{"method":"a","jsonrpc":"2.0","params":[true,false,null,-1.5e3]}`,
		`{"jsonrpc":"2.0","method":"m","id":null}`,
		`{"jsonrpc":"2.0","method":"m","params":{"a":{"b":[{}]}}} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, p, err := DecodeNotification(b)
		var doc map[string]json.RawMessage
		jerr := json.Unmarshal(b, &doc)
		if err == nil {
			if !json.Valid(b) {
				t.Fatalf("accepted invalid JSON %q", b)
			}
			if p != nil && !json.Valid(p) {
				t.Fatalf("params %q of %q are not a JSON value", p, b)
			}
			if !utf8.Valid(b) {
				return // encoding/json replaces invalid UTF-8; the kind decides
			}
			var jm string
			if json.Unmarshal(doc["method"], &jm) != nil || jm != m {
				t.Fatalf("%q: method %q, encoding/json %q", b, m, jm)
			}
			if p != nil && !bytes.Equal(p, doc["params"]) {
				t.Fatalf("%q: params %q, encoding/json %q", b, p, doc["params"])
			}
			return
		}
		if jerr != nil || !utf8.Valid(b) {
			return
		}
		var v, jm string
		_, hasID := doc["id"]
		if json.Unmarshal(doc["jsonrpc"], &v) == nil && v == "2.0" && json.Unmarshal(doc["method"], &jm) == nil && jm != "" && !hasID {
			if utf8.ValidString(jm) && !bytes.Contains(b, []byte(`\u`)) {
				t.Fatalf("refused a valid notification %q: %v", b, err)
			}
		}
	})
}

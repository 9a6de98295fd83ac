package client

import "testing"

func TestSplitEnvelope(t *testing.T) {
	for _, tc := range []struct{ in, method, params string }{
		{`{"jsonrpc":"2.0","method":"terminal/output","params":{"data":"x}"}}`, "terminal/output", `{"data":"x}"}`},
		{`{"jsonrpc":"2.0","method":"channel/ready","params":{}}`, "channel/ready", `{}`},
		{`{"method":"a\"b","params":[1], "jsonrpc":"2.0"}`, `a"b`, `[1]`},
		{`{"params":{"k":1},"jsonrpc":"2.0","method":"m"}`, "m", `{"k":1}`},
	} {
		m, p := splitEnvelope([]byte(tc.in))
		if m != tc.method || string(p) != tc.params {
			t.Errorf("splitEnvelope(%s) = %q, %s; want %q, %s", tc.in, m, p, tc.method, tc.params)
		}
	}
}

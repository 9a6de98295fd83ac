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

func TestAppendTerminalData(t *testing.T) {
	for _, tc := range []struct{ params, want string }{
		{`{"data":"a\u001b[1mb\"c\\"}`, "a\x1b[1mb\"c\\"},
		{`{"data":"\ud83d\ude00 中"}`, "😀 中"},
		{`{"data":"x","y":"z"}`, "x"},
		{`{"y":1,"data":"q"}`, "q"},
	} {
		got, err := Message{Method: "terminal/output", Params: []byte(tc.params)}.AppendTerminalData(nil)
		if err != nil || string(got) != tc.want {
			t.Errorf("AppendTerminalData(%s) = %q, %v; want %q", tc.params, got, err, tc.want)
		}
	}
}

// TestLifecycleMethod: the messages a Sub credits at once are exactly the
// lifecycle messages of PROTOCOL.md §4; data messages are batched.
func TestLifecycleMethod(t *testing.T) {
	for method, want := range map[string]bool{
		"terminal/exit": true, "tcp/eof": true, "tcp/closed": true,
		"terminal/output": false, "terminal/reset": false, "terminal/resize": false, "channel/ready": false,
		"telemetry/samples": false, "telemetry/dropped": false, "tcp/data": false, "": false,
	} {
		if got := lifecycleMethod(method); got != want {
			t.Errorf("lifecycleMethod(%q) = %v, want %v", method, got, want)
		}
	}
}

package session

import "testing"

func TestDuplicateMember(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, "method"},
		{`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1,"y":[{"x":2}],"x":3}}`, "x"},
		{`{"a":{"b":1},"c":[1,{"b":2,"b":3}]}`, "b"},
		{`{"a":{"b":1},"b":{"a":2}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}`, "Method"},
		{`{"a":[{"k":1},{"k":2}],"k":"k"}`, ""},
		{`{"a":"a","b":"a"}`, ""},
		{`{"a":1,"a":`, "a"},
		{`not json`, ""},
		{`[{"a":1},{"a":1}]`, ""},
	} {
		if got := duplicateMember([]byte(tc.in)); got != tc.want {
			t.Errorf("duplicateMember(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestErrorMessagesEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"bell\x07 del\x7f": `bell\x07 del\x7f`,
		"c1 \u009b31m é 雪": `c1 \u009b31m é 雪`,
	} {
		if got := rpcErr(-32600, in).Message; got != want {
			t.Errorf("rpcErr(%q).Message = %q, want %q", in, got, want)
		}
	}
}

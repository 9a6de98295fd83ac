package pty

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestInputData: the fast read of terminal/input's params gives what
// encoding/json gives, and leaves every other shape to it.
func TestInputData(t *testing.T) {
	for _, p := range []string{
		`{"data":"x"}`, `{"data":""}`, `{"data":"\r"}`, `{"data":"\u001b[A"}`, `{"data":"\\"}`,
		`{"data":"é漢😀"}`, `{"data":"\ud83d\ude00"}`, `{"data":"a\/b"}`, `{"data":"\t\b\f\n"}`,
		// Left to encoding/json:
		`{"data":"say \"hi\""}`, `{"data":"x","data":"y"}`, `{ "data":"x"}`, `{"Data":"x"}`,
		`{"data":"\ud800"}`, "{\"data\":\"\xff\"}", `{"data":1}`, `{"data":"a\"}`,
	} {
		var want struct {
			Data *string `json:"data"`
		}
		werr := json.Unmarshal([]byte(p), &want)
		got, ok := inputData([]byte(p))
		if !ok {
			continue
		}
		if werr != nil || want.Data == nil || !bytes.Equal(got, []byte(*want.Data)) {
			t.Errorf("inputData(%s) = %q; encoding/json: %v, %v", p, got, want.Data, werr)
		}
	}
	if _, ok := inputData([]byte(`{"data":"x"}`)); !ok {
		t.Error("the common shape is not read fast")
	}
}

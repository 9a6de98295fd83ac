package wire

import (
	"bytes"
	"testing"
)

// TestDecodeTCPDataRefusesRawControls: a raw CR or LF inside data is not
// JSON (and the base64 decoder would skip it): refused, as encoding/json
// refuses it (FuzzParseTCPData found the fast path taking it).
func TestDecodeTCPDataRefusesRawControls(t *testing.T) {
	for _, p := range []string{
		"{\"offset\":0,\"data\":\"\r\"}",
		"{\"offset\":0,\"data\":\"\n\"}",
		"{\"offset\":0,\"data\":\"QUJD\n\"}",
		"{\"offset\":0,\"data\":\"QU\r\nJD\"}",
		"{\"offset\":0,\"data\":\"\n\n\n\n\"}",
	} {
		if _, _, err := DecodeTCPData("tcp/data", []byte(p)); err == nil {
			t.Errorf("DecodeTCPData(%q) accepted it", p)
		}
	}
	off, data, err := DecodeTCPData("tcp/data", []byte(`{"offset":7,"data":"QUJD"}`))
	if err != nil || off != 7 || !bytes.Equal(data, []byte("ABC")) {
		t.Fatalf("DecodeTCPData = %d, %q, %v", off, data, err)
	}
}

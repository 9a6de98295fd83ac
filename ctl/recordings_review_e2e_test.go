package ctl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestE2ERecordingsListOfThousands: ahpctl recordings list lists a
// directory of 30,000 recordings (an answer of about 5 MiB, past gRPC's
// default receive limit of 4 MiB).
func TestE2ERecordingsListOfThousands(t *testing.T) {
	const n = 30000
	dir := t.TempDir()
	recs := filepath.Join(dir, "state", "recordings")
	if err := os.MkdirAll(recs, 0o700); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		at := t0.Add(time.Duration(i) * 37 * time.Second)
		stem := filepath.Join(recs, fmt.Sprintf("term%d-%s", i%50, at.Format("20060102T150405Z")))
		cast := fmt.Sprintf(`{"version":2,"width":80,"height":24,"timestamp":%d,"title":"bash -c some command","env":{"TERM":"xterm-256color"}}`+"\n"+`[0.5,"o","hello\r\n"]`+"\n", at.Unix())
		if err := os.WriteFile(stem+".cast", []byte(cast), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stem+".index.jsonl", []byte(`{"type":"keyframe","time":0,"offset":120,"rows":24,"cols":80,"screen":"\u001b[1;1H"}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemonIn(t, dir, nil, nil)
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("recordings", "list", "-o", "json")), &list); err != nil || len(list) != n {
		t.Fatalf("recordings list: %d recordings, %v; want %d", len(list), err, n)
	}
}

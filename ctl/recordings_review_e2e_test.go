package ctl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2ERecordingsListOfThousands: ahpctl recordings list lists a
// directory of 30,000 recordings (about 5 MiB, past gRPC's default
// message limit of 4 MiB), every one once, newest first, across the
// daemon's pages of 1000; --limit N lists the newest N.
func TestE2ERecordingsListOfThousands(t *testing.T) {
	const n = 30000
	dir := t.TempDir()
	recs := filepath.Join(dir, "state", "recordings")
	if err := os.MkdirAll(recs, 0o700); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := func(i int) string {
		return fmt.Sprintf("term%d-%s", i%50, t0.Add(time.Duration(i)*37*time.Second).Format("20060102T150405Z"))
	}
	for i := range n {
		at := t0.Add(time.Duration(i) * 37 * time.Second)
		stem := filepath.Join(recs, id(i))
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
	for k, r := range list {
		if r.ID != id(n-1-k) {
			t.Fatalf("recordings list: #%d is %s, want %s (newest first, each once)", k, r.ID, id(n-1-k))
		}
	}
	list = nil
	if err := json.Unmarshal([]byte(d.mustCtl("recordings", "list", "--limit", "1500", "-o", "json")), &list); err != nil || len(list) != 1500 ||
		list[0].ID != id(n-1) || list[1499].ID != id(n-1500) {
		t.Fatalf("recordings list --limit 1500: %d recordings, %v; want the newest 1500", len(list), err)
	}
	if out := d.mustCtl("recordings", "list", "--limit", "2"); strings.Count(out, "\n") != 3 || !strings.Contains(out, id(n-2)) {
		t.Fatalf("recordings list --limit 2 = %q, want a header and the 2 newest", out)
	}
	if _, errOut, code := d.ctl("recordings", "list", "--limit", "-1"); code != 2 || !strings.Contains(errOut, "--limit") {
		t.Fatalf("recordings list --limit -1: exit %d, %q; want a usage error", code, errOut)
	}
}

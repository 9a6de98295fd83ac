package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// TestWholeGzip: a heap profile counts as written only once its gzip
// stream is whole; a file cut short, as while the daemon writes it, or
// missing, does not.
func TestWholeGzip(t *testing.T) {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write(bytes.Repeat([]byte("profile "), 1000))
	z.Close()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"whole", b.Bytes(), true},
		{"cut short", b.Bytes()[:b.Len()-4], false},
		{"empty", nil, false},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := wholeGzip(path); got != tc.want {
			t.Errorf("wholeGzip(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if wholeGzip(filepath.Join(dir, "missing")) {
		t.Error("wholeGzip(missing) = true, want false")
	}
}

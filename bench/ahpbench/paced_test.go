package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPacedCat: the paced program writes the whole file, byte for byte,
// and no faster than its rate.
func TestPacedCat(t *testing.T) {
	data := bytes.Repeat([]byte("paced line 0123456789\r\n"), 10000) // 230 KB
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	if err := pacedCat(&out, path, 1e6); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("wrote %d bytes, not the file's %d", out.Len(), len(data))
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("230 KB at 1 MB/s took %v", d)
	}
	if err := pacedCat(&out, filepath.Join(t.TempDir(), "none"), 1e6); err == nil {
		t.Fatal("a file that does not exist: no error")
	}
}

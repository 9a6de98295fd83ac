package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// The file is replaced whole, private, and no temporary file is left;
// a write that cannot happen leaves the old file as it was.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after Write: %q, mode %v, %v", b, fi.Mode().Perm(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want 1", len(ents))
	}
	if err := Write(filepath.Join(dir, "missing", "x"), []byte("y")); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("a failed write changed another file: %q", b)
	}
}

package daemon_test

import (
	"os"
	"sync"
	"testing"

	"github.com/ahp-dev/ahpd/internal/testbin"
)

// builtBins holds ahpd and ahpctl built once per test binary for each
// race setting (the tests that run the real binaries share them).
var builtBins struct {
	mu   sync.Mutex
	dirs map[bool]string
}

// buildBins returns a directory with ahpd and ahpctl, built with -race
// when race is set; it skips the test under -short.
func buildBins(t *testing.T, race bool) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the ahpd binary")
	}
	builtBins.mu.Lock()
	defer builtBins.mu.Unlock()
	if dir, ok := builtBins.dirs[race]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", "ahpd-bin-")
	if err != nil {
		t.Fatal(err)
	}
	if err := testbin.Build(dir, race, testbin.Commands...); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	if builtBins.dirs == nil {
		builtBins.dirs = map[bool]string{}
	}
	builtBins.dirs[race] = dir
	return dir
}

// removeBins deletes what buildBins built (TestMain, after the tests).
func removeBins() {
	for _, dir := range builtBins.dirs {
		os.RemoveAll(dir)
	}
}

// Package testbin builds the project's commands for tests that drive the
// real binaries (ctl's end-to-end tests, the daemon's systemd tests).
package testbin

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// Commands are the import paths of ahpd and ahpctl.
var Commands = []string{"github.com/ahp-dev/ahpd/cmd/ahpd", "github.com/ahp-dev/ahpd/cmd/ahpctl"}

// Build runs `go build -o dir/` for pkgs, with -race when race is set
// (pass the test binary's own race setting), within 8 minutes.
func Build(dir string, race bool, pkgs ...string) error {
	return BuildFlags(dir, race, nil, pkgs...)
}

// BuildFlags is Build with more `go build` flags (-ldflags, say).
func BuildFlags(dir string, race bool, flags []string, pkgs ...string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go build: no go command on PATH: %w", err)
	}
	args := append([]string{"build", "-o", dir + "/"}, flags...)
	if race {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goTool, append(args, pkgs...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

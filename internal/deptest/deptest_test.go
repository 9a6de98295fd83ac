// Package deptest enforces the import direction of DEVELOPERS.md:
// flow/ uses only the standard library; channel packages use flow/ but not
// the daemon; the daemon never imports the CLI, nor the CLI the daemon.
package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ahp-dev/ahpd"

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	rules := []struct {
		from    string
		allowed func(imp string) bool
		why     string
	}{
		{"flow", func(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }, "flow/ imports only the standard library"},
		{"pty", notOurs("daemon", "ctl", "cmd", "tcp", "telemetry"), "channel packages use flow/, never the daemon or each other"},
		{"telemetry", notOurs("daemon", "ctl", "cmd", "tcp", "pty"), "channel packages use flow/, never the daemon or each other"},
		{"tcp", notOurs("daemon", "ctl", "cmd", "pty", "telemetry"), "channel packages use flow/, never the daemon or each other"},
		{"daemon", notOurs("ctl", "cmd"), "the daemon never imports the CLI"},
		{"ctl", notOurs("daemon", "cmd", "pty", "tcp", "telemetry"), "the CLI talks to the daemon only through proto/ and the wire protocol"},
	}
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		top := strings.SplitN(rel, "/", 2)[0]
		for _, r := range rules {
			if r.from != top {
				continue
			}
			seen++
			for _, imp := range p.Imports {
				if !r.allowed(imp) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.why)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no package matched a rule: is the module path right?")
	}
}

func notOurs(tops ...string) func(string) bool {
	return func(imp string) bool {
		for _, top := range tops {
			if imp == module+"/"+top || strings.HasPrefix(imp, module+"/"+top+"/") {
				return false
			}
		}
		return true
	}
}

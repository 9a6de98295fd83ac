// Package deptest enforces the import direction of DEVELOPERS.md:
// flow/ uses only the standard library; channel packages use flow/ but not
// the daemon; the daemon never imports the CLI, nor the CLI the daemon.
// Inside daemon/: the session is kind-blind (no channel package) and
// knows neither the service nor the wiring; the service does not know the
// wiring; the daemon's leaf packages (auth, config, registry, events,
// systemd, control, webui) know none of the three.
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
	leaves := "the daemon's leaf packages (auth, config, registry, events, systemd, control, webui) import neither the session, the service nor the wiring"
	rules := []struct {
		from    string // a package path relative to the module, and the packages under it
		allowed func(imp string) bool
		why     string
	}{
		{"flow", func(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }, "flow/ imports only the standard library"},
		{"pty", notOurs("daemon", "ctl", "cmd", "tcp", "telemetry"), "channel packages use flow/, never the daemon or each other"},
		{"telemetry", notOurs("daemon", "ctl", "cmd", "tcp", "pty"), "channel packages use flow/, never the daemon or each other"},
		{"tcp", notOurs("daemon", "ctl", "cmd", "pty", "telemetry"), "channel packages use flow/, never the daemon or each other"},
		{"daemon", notOurs("ctl", "cmd"), "the daemon never imports the CLI"},
		{"ctl", notOurs("daemon", "cmd", "pty", "tcp", "telemetry"), "the CLI talks to the daemon only through proto/ and the wire protocol"},
		{"daemon/session", forbid("daemon", "daemon/service/...", "pty/...", "tcp/...", "telemetry/..."), "the session serves every channel kind through flow's contract, and knows neither the service nor the wiring"},
		{"daemon/service", forbid("daemon", "daemon/metrics/..."), "the service does not know the wiring"},
		{"daemon/metrics", forbid("daemon"), "the metrics read the service; they do not know the wiring"},
		{"daemon/auth", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
		{"daemon/config", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
		{"daemon/registry", forbid("daemon", "daemon/session/...", "daemon/service/...", "pty/...", "tcp/...", "telemetry/..."), leaves + "; the registry is kind-blind"},
		{"daemon/events", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
		{"daemon/systemd", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
		{"daemon/control", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
		{"daemon/webui", forbid("daemon", "daemon/session/...", "daemon/service/..."), leaves},
	}
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for _, r := range rules {
			if rel != r.from && !strings.HasPrefix(rel, r.from+"/") {
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

// forbid refuses the module's packages named by paths: "x" is the package
// x itself, "x/..." x and every package under it.
func forbid(paths ...string) func(string) bool {
	return func(imp string) bool {
		for _, p := range paths {
			if tree, ok := strings.CutSuffix(p, "/..."); ok {
				if imp == module+"/"+tree || strings.HasPrefix(imp, module+"/"+tree+"/") {
					return false
				}
			} else if imp == module+"/"+p {
				return false
			}
		}
		return true
	}
}

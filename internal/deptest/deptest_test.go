// Package deptest enforces the import direction of DEVELOPERS.md:
// flow/ uses only the standard library; channel packages use flow/ but not
// the daemon; the daemon never imports the CLI, nor the CLI the daemon;
// internal/ is infrastructure that every layer may use, so it imports no
// layer above flow/ and proto/; the benchmark programs under bench/ may use
// everything, and nothing of the product (tests aside) uses them.
// Inside daemon/: the session is kind-blind (no channel package) and
// knows neither the service nor the wiring; the service does not know the
// wiring; the daemon's leaf packages (auth, config, registry, events,
// systemd, control, webui) know none of the three.
package deptest

import (
	"encoding/json"
	"fmt"
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

// rule says which of the module's imports the packages at from (a path
// relative to the module) and under it may have.
type rule struct {
	from    string
	allowed func(imp string) bool
	why     string
}

var leaves = "the daemon's leaf packages (auth, config, registry, events, systemd, control, webui) import neither the session, the service nor the wiring"

var rules = []rule{
	{"flow", func(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }, "flow/ imports only the standard library"},
	{"internal", notOurs("daemon", "ctl", "cmd", "bench", "pty", "tcp", "telemetry"), "internal/ is infrastructure below every layer: it may use flow/ and proto/, never a channel package, the daemon, the CLI or the benchmarks"},
	{"proto", notOurs("daemon", "ctl", "cmd", "bench", "pty", "tcp", "telemetry", "internal"), "proto/ is generated code; it imports nothing of ours"},
	{"pty", notOurs("daemon", "ctl", "cmd", "bench", "tcp", "telemetry"), "channel packages use flow/, never the daemon or each other"},
	{"telemetry", notOurs("daemon", "ctl", "cmd", "bench", "tcp", "pty"), "channel packages use flow/, never the daemon or each other"},
	{"tcp", notOurs("daemon", "ctl", "cmd", "bench", "pty", "telemetry"), "channel packages use flow/, never the daemon or each other"},
	{"daemon", notOurs("ctl", "cmd", "bench"), "the daemon never imports the CLI or the benchmarks"},
	{"ctl", either(either(only("pty"), only("pty/record")), notOurs("daemon", "cmd", "bench", "pty", "tcp", "telemetry")), "the CLI talks to the daemon only through proto/ and the wire protocol (it uses pty's headless emulator, pty.Screen, for attach's predictive echo, and pty/record's asciicast reader for recordings cat)"},
	{"cmd", notOurs("bench"), "the binaries we ship do not link the benchmarks"},
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

// check returns one line per import that breaks a rule, and the rules that
// matched no package (a moved or renamed folder must not switch its rule
// off unnoticed).
func check(pkgs []pkg) (violations, unmatched []string) {
	matched := make([]bool, len(rules))
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for i, r := range rules {
			if rel != r.from && !strings.HasPrefix(rel, r.from+"/") {
				continue
			}
			matched[i] = true
			for _, imp := range p.Imports {
				if !r.allowed(imp) {
					violations = append(violations, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, r.why))
				}
			}
		}
	}
	for i, r := range rules {
		if !matched[i] {
			unmatched = append(unmatched, r.from)
		}
	}
	return violations, unmatched
}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	violations, unmatched := check(pkgs)
	for _, v := range violations {
		t.Error(v)
	}
	for _, u := range unmatched {
		t.Errorf("no package at %s/%s: the rule for it checks nothing (moved? update the rule)", module, u)
	}
}

// TestRulesCatchUpwardImports feeds check made-up packages, each with one
// import the rules exist to refuse, and one that is allowed.
func TestRulesCatchUpwardImports(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	refused := []pkg{
		{ImportPath: m("internal/units"), Imports: []string{m("ctl/client")}},
		{ImportPath: m("internal/wire"), Imports: []string{m("daemon/session")}},
		{ImportPath: m("internal/procs"), Imports: []string{m("daemon")}},
		{ImportPath: m("internal/cork"), Imports: []string{m("bench/termbench")}},
		{ImportPath: m("internal/fds"), Imports: []string{m("pty")}},
		{ImportPath: m("cmd/ahpd"), Imports: []string{m("bench/benchproc")}},
		{ImportPath: m("daemon/service"), Imports: []string{m("bench/termbench")}},
		{ImportPath: m("flow"), Imports: []string{m("internal/b64")}},
		{ImportPath: m("pty"), Imports: []string{m("daemon/session")}},
		{ImportPath: m("ctl"), Imports: []string{m("tcp")}},
	}
	for _, p := range refused {
		if v, _ := check([]pkg{p}); len(v) != 1 {
			t.Errorf("%s importing %s: %d violations, want 1", p.ImportPath, p.Imports[0], len(v))
		}
	}
	allowed := []pkg{
		{ImportPath: m("internal/wire"), Imports: []string{m("flow"), m("internal/b64"), "strings"}},
		{ImportPath: m("internal/limits"), Imports: []string{m("proto/ahp/v1")}},
		{ImportPath: m("bench/ahpbench"), Imports: []string{m("ctl/client"), m("bench/termbench"), m("daemon")}},
		{ImportPath: m("daemon"), Imports: []string{m("pty"), m("internal/wire")}},
		{ImportPath: m("ctl"), Imports: []string{m("pty"), m("ctl/client")}},
	}
	for _, p := range allowed {
		if v, _ := check([]pkg{p}); len(v) != 0 {
			t.Errorf("%s: %v, want no violation", p.ImportPath, v)
		}
	}
}

// only allows exactly the module's package at rel (not those under it).
func only(rel string) func(string) bool {
	return func(imp string) bool { return imp == module+"/"+rel }
}

// either allows what a or b allows.
func either(a, b func(string) bool) func(string) bool {
	return func(imp string) bool { return a(imp) || b(imp) }
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

package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/ahp-dev/ahpd/internal/editdist"
)

// action runs a command with its positional arguments.
type action func(ctx context.Context, a *app, args []string) error

// command is a node of the command tree: a group (sub) or a leaf (setup).
type command struct {
	name     string
	aliases  []string
	args     string // positional arguments in the usage line, e.g. "URI"
	summary  string
	help     string   // paragraphs after the usage line
	examples []string // shell lines
	hidden   bool
	sub      []*command
	// setup registers the command's flags and returns its action.
	setup func(fs *flag.FlagSet) action
	// minArgs and maxArgs bound the positional arguments (maxArgs < 0: any).
	minArgs, maxArgs int
	// rawTail stops flag parsing at the first positional argument, so the
	// rest (a command line to run) is passed as is.
	rawTail bool
	// complete names what the positional arguments are, for completion:
	// "channel", "viewer", "token", "limit", "tcprule", "shell".
	complete string
}

func (c *command) lookup(name string) *command {
	for _, s := range c.sub {
		if s.name == name {
			return s
		}
		for _, al := range s.aliases {
			if al == name {
				return s
			}
		}
	}
	return nil
}

// suggest returns the subcommand name (or alias) of c closest to name,
// if it is close enough to be a typo: at most 2 edits, and fewer than
// half of name's letters.
func (c *command) suggest(name string) string {
	best, bestD := "", 3
	for _, s := range c.sub {
		if s.hidden {
			continue
		}
		for _, n := range append([]string{s.name}, s.aliases...) {
			if d := editdist.Distance(name, n); d < bestD && 2*d < len(name) {
				best, bestD = s.name, d
			}
		}
	}
	return best
}

// leaves returns c's leaf commands (c itself if it is one).
func (c *command) leaves() []*command {
	if c.setup != nil {
		return []*command{{name: "", args: c.args, summary: c.summary}}
	}
	var out []*command
	for _, s := range c.sub {
		if !s.hidden {
			out = append(out, s)
		}
	}
	return out
}

// dispatch walks the tree with args and runs the leaf it reaches.
func (a *app) dispatch(ctx context.Context, c *command, args []string, path string) error {
	if c.setup == nil {
		if c.name == "" && len(args) > 0 && args[0] == "help" {
			return a.help(args[1:])
		}
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			w := a.stdout
			if len(args) == 0 {
				w = a.stderr
			}
			a.printGroupUsage(w, c, path)
			if len(args) == 0 {
				return usagef("%s: missing subcommand (see %s --help)", path, path)
			}
			return flag.ErrHelp
		}
		s := c.lookup(args[0])
		if s == nil {
			if guess := c.suggest(args[0]); guess != "" {
				return usagef("%s: unknown command %q; did you mean %q? (see %s --help)", path, args[0], guess, path)
			}
			return usagef("%s: unknown command %q (see %s --help)", path, args[0], path)
		}
		return a.dispatch(ctx, s, args[1:], path+" "+s.name)
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.setup(fs)
	pos, err := parseFlags(fs, args, c.rawTail)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.printLeafUsage(a.stdout, c, fs, path)
			return flag.ErrHelp
		}
		return usagef("%s: %s (see %s --help)", path, dashes(err), path)
	}
	if a.output != "" {
		if fs.Lookup("o") == nil {
			return usagef("%s: takes no -o (the global -o %s applies to listings)", path, a.output)
		}
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "o" || f.Name == "output" })
		if !explicit {
			_ = fs.Set("o", a.output)
		}
	}
	if len(pos) < c.minArgs || (c.maxArgs >= 0 && len(pos) > c.maxArgs) {
		want := c.args
		if want == "" {
			want = "no arguments"
		}
		return usagef("%s: want %s, got %d argument(s) (see %s --help)", path, want, len(pos), path)
	}
	return run(ctx, a, pos)
}

// flagInMessage is a flag as Go's flag package names it in an error
// ("flag provided but not defined: -bogus").
var flagInMessage = regexp.MustCompile(`(^|: |flag |for )-([A-Za-z][A-Za-z0-9_.-]+)`)

// dashes is a flag parse error with the flags written as ahpctl's help
// writes them: --name, and -o for a one-letter flag.
func dashes(err error) string {
	return flagInMessage.ReplaceAllString(err.Error(), "$1--$2")
}

// parseFlags parses flags anywhere among the arguments (the flag package
// stops at the first positional one). "--" ends the flags; with rawTail so
// does the first positional argument.
func parseFlags(fs *flag.FlagSet, args []string, rawTail bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		if rawTail {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (a *app) help(args []string) error {
	c, path := rootCommand(), "ahpctl"
	for _, name := range args {
		s := c.lookup(name)
		if s == nil {
			return usagef("help: unknown command %q", strings.Join(args, " "))
		}
		c, path = s, path+" "+s.name
	}
	if c.setup == nil {
		if c.name == "" {
			a.printGlobalUsage(a.stdout)
		} else {
			a.printGroupUsage(a.stdout, c, path)
		}
		return nil
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	c.setup(fs)
	a.printLeafUsage(a.stdout, c, fs, path)
	return nil
}

func (a *app) printGroupUsage(w io.Writer, c *command, path string) {
	fmt.Fprintf(w, "%s\n\nUsage:\n", c.summary)
	for _, s := range c.leaves() {
		fmt.Fprintf(w, "  %s\n", strings.Join(strings.Fields(path+" "+s.name+" "+s.args), " "))
	}
	fmt.Fprintf(w, "\nRun '%s SUBCOMMAND --help' for flags and examples.\n", path)
}

func (a *app) printLeafUsage(w io.Writer, c *command, fs *flag.FlagSet, path string) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s\n", c.summary, strings.Join(strings.Fields(path+" [flags] "+c.args), " "))
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if len(f.Name) == 1 {
				line = "  -" + f.Name
			}
			if name != "" {
				line += " " + name
			}
			if !zeroDefault(f.DefValue) && !strings.Contains(usage, "(default") {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(w, "%-28s %s\n", line, usage)
		})
	}
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// zeroDefault reports a flag default not worth showing.
func zeroDefault(v string) bool {
	switch v {
	case "", "false", "0", "0s", "[]":
		return true
	}
	return false
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// outputFlag registers -o/--output (table, wide, json or yaml). A global
// -o before the command (ahpctl -o json channels list) sets it too.
func outputFlag(fs *flag.FlagSet) *string {
	o := new(string)
	fs.StringVar(o, "o", "table", "output `format`: table, wide (more columns), json or yaml")
	fs.StringVar(o, "output", "table", "same as -o")
	return o
}

var outputFormats = []string{"table", "wide", "json", "yaml"}

func checkOutput(o string) error {
	if !slices.Contains(outputFormats, o) {
		return usagef("-o must be table, wide, json or yaml, got %q", o)
	}
	return nil
}

// structured reports whether o is a data format (json or yaml) rather than
// a table.
func structured(o string) bool { return o == "json" || o == "yaml" }

// printAs prints v as JSON or YAML (o is json or yaml).
func (a *app) printAs(o string, v any) error {
	if o == "yaml" {
		b, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(b)
		return err
	}
	return a.printJSON(v)
}

package ctl

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// The tcp verbs (PROTOCOL.md §8, §10): the daemon's TCP allow-list and TCP
// channels created over the control socket.

// tcpDialTimeout is the daemon's dial bound, added to --timeout for
// `tcp create`, which waits for the dial.
const tcpDialTimeout = 10 * time.Second

const tcpRuleHelp = `A RULE is HOST:PORT (a host name, one port), ADDR:PORT (an IPv4 address or a
[bracketed] IPv6 one) or CIDR:PORT-PORT (a prefix and an inclusive port range):
127.0.0.1:3000, [::1]:3000, 10.0.0.0/8:80-443, localhost:3000. Nothing is allowed
until a rule allows it. A name is resolved when a channel dials, and every
address the dial tries must be allowed by an address rule too: localhost:3000
needs 127.0.0.1:3000 (or [::1]:3000) beside it.`

func tcpCommand() *command {
	return &command{name: "tcp", summary: "Allow TCP targets and create TCP channels", sub: []*command{
		{name: "allow", args: "RULE", summary: "Allow a TCP target (kept in the daemon's state directory)", minArgs: 1, maxArgs: 1, setup: setupTCPAllow,
			help: tcpRuleHelp + `

The rule applies at once and is kept with the daemon's state (tcp-allow.json in
its state directory), which the daemon reads at start and on a reload (SIGHUP)
beside the tcpAllow key of its config file; no config file is written. It
prints the file it saved the rule in. When the daemon cannot write that file,
the rule holds until ahpd reloads or restarts, and a warning says why.`,
			examples: []string{"ahpctl tcp allow 127.0.0.1:3000", "ahpctl tcp allow 10.0.0.0/8:80-443", "ahpctl tcp allow localhost:3000 && ahpctl tcp allow 127.0.0.1:3000"}},
		{name: "deny", aliases: []string{"rm"}, args: "RULE", summary: "Remove a TCP allow rule (from the file that holds it)", minArgs: 1, maxArgs: 1, complete: "tcprule", setup: setupTCPDeny,
			help:     "RULE may be written in any form that means the same rule. The rule is removed\nat once, from the daemon's state directory when ahpctl tcp allow put it there,\nand from the tcpAllow key of the config file the daemon loaded when that key\nholds it (every other line of the file is kept); it prints the files it\nchanged. A rule that is not allowed is an error (exit 1). Channels already\nconnected stay open; close them with ahpctl channels close.",
			examples: []string{"ahpctl tcp deny 127.0.0.1:3000"}},
		{name: "list", aliases: []string{"ls"}, summary: "List the TCP allow-list", maxArgs: 0, setup: setupTCPList,
			examples: []string{"ahpctl tcp list", "ahpctl tcp list -o json"}},
		{name: "create", args: "HOST:PORT", summary: "Dial an allowed target and print the TCP channel's URI", minArgs: 1, maxArgs: 1, setup: setupTCPCreate,
			help:     "The daemon dials HOST:PORT (an IPv6 address in brackets) and prints the URI\nonce connected; its first subscriber (ahpctl forward LOCAL_ADDR URI, or another\nAHP/1 client) becomes its consumer. A channel nobody takes within tcpRetain\n(ahpctl limits get) is closed. The dial fails if no rule allows the target (see\nahpctl tcp allow), or if it is refused, unreachable or not connected within 10 s.",
			examples: []string{"ahpctl tcp create 127.0.0.1:3000", "ahpctl tcp create --id db '[::1]:5432'", "ahpctl forward 5433 $(ahpctl tcp create 127.0.0.1:5432)"}},
	}}
}

// tcpUsage turns the daemon's INVALID_ARGUMENT into bad usage (exit 2): the
// rule or target given on the command line is wrong.
func tcpUsage(verb string, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	msg := st.Message()
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			msg = br.FieldViolations[0].Description
			if f := br.FieldViolations[0].Field; f != "rule" {
				msg = f + ": " + msg
			}
		}
	}
	return usagef("tcp %s: %s", verb, msg)
}

// connectFailed reports whether err is the daemon's failed dial (rather
// than an unreachable daemon, which is UNAVAILABLE too).
func connectFailed(err error) (string, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Reason == "CONNECT_FAILED" {
			return st.Message(), true
		}
	}
	return "", false
}

// warnNotPersisted tells the operator that a change holds only until the
// next reload or restart.
func (a *app) warnNotPersisted(persisted bool, why string) {
	if !persisted {
		fmt.Fprintf(a.stderr, "ahpctl: warning: the change applies now but was not saved (%s); it holds until ahpd reloads or restarts\n", oneLine(why))
	}
}

// filesChanged says, for tcp deny's output, which files the rule was
// removed from: "" when none.
func filesChanged(configFile, stateFile string) string {
	var parts []string
	if configFile != "" {
		parts = append(parts, "the config file "+configFile)
	}
	if stateFile != "" {
		parts = append(parts, stateFile)
	}
	return strings.Join(parts, " and ")
}

func setupTCPAllow(*flag.FlagSet) action {
	return func(ctx context.Context, a *app, args []string) error {
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.tcp.AllowTCP(rctx, &ahpv1.AllowTCPRequest{Rule: args[0]})
		if err != nil {
			return tcpUsage("allow", err)
		}
		where := ""
		switch {
		case !res.Persisted:
		case res.StateFile != "":
			where = " (saved in " + res.StateFile + ")"
		case res.ConfigFile != "":
			where = " (in the config file " + res.ConfigFile + ")"
		}
		if res.Added {
			fmt.Fprintf(a.stdout, "allowed %s%s\n", res.Rule, where)
		} else {
			fmt.Fprintf(a.stdout, "%s was allowed already%s\n", res.Rule, where)
		}
		a.warnNotPersisted(res.Persisted, res.PersistError)
		if res.Hint != "" {
			fmt.Fprintf(a.stderr, "ahpctl: note: %s\n", res.Hint)
		}
		return nil
	}
}

func setupTCPDeny(*flag.FlagSet) action {
	return func(ctx context.Context, a *app, args []string) error {
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.tcp.DenyTCP(rctx, &ahpv1.DenyTCPRequest{Rule: args[0]})
		if err != nil {
			return tcpUsage("deny", err)
		}
		where := ""
		if f := filesChanged(res.ConfigFile, res.StateFile); f != "" && res.Persisted {
			where = " (removed from " + f + ")"
		}
		if res.Removed {
			fmt.Fprintf(a.stdout, "denied %s%s\n", res.Rule, where)
		} else {
			// Not in force (an earlier deny could not write a file), but
			// still in a file.
			fmt.Fprintf(a.stdout, "%s was not in force%s\n", res.Rule, where)
		}
		a.warnNotPersisted(res.Persisted, res.PersistError)
		return nil
	}
}

// tcpRulesView is `tcp list -o json`.
type tcpRulesView struct {
	Rules []string `json:"rules"`
	// Sources[i] says which files hold Rules[i]: "config", "state",
	// "config,state" or "" (in force only).
	Sources    []string `json:"sources"`
	ConfigFile string   `json:"configFile"` // "" when the daemon loaded none
	StateFile  string   `json:"stateFile"`  // where tcp allow keeps rules
}

func setupTCPList(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	return func(ctx context.Context, a *app, _ []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.tcp.ListTCPRules(rctx, &ahpv1.ListTCPRulesRequest{})
		if err != nil {
			return err
		}
		v := tcpRulesView{Rules: res.Rules, Sources: res.Sources, ConfigFile: res.ConfigFile, StateFile: res.StateFile}
		if v.Rules == nil {
			v.Rules = []string{}
		}
		for len(v.Sources) < len(v.Rules) { // an older daemon
			v.Sources = append(v.Sources, "")
		}
		if structured(*o) {
			return a.printAs(*o, v)
		}
		tw := a.table("RULE", "FROM", "MATCHES")
		for i, r := range v.Rules {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r, ruleSource(v.Sources[i]), ruleMatches(r))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(v.Rules) == 0 {
			fmt.Fprintln(a.stdout, "\nNo TCP target is allowed (ahpctl tcp allow RULE).")
		}
		fmt.Fprintln(a.stdout)
		if v.ConfigFile != "" {
			fmt.Fprintf(a.stdout, "config: %s (its tcpAllow key; tcp deny edits it)\n", v.ConfigFile)
		} else {
			fmt.Fprintln(a.stdout, "config: none (the daemon loaded no config file)")
		}
		if v.StateFile != "" {
			fmt.Fprintf(a.stdout, "state:  %s (tcp allow keeps rules here)\n", v.StateFile)
		}
		return nil
	}
}

// ruleSource is the FROM column: where a rule is kept.
func ruleSource(s string) string {
	switch s {
	case "":
		return "-" // in force only
	case "config,state":
		return "config+state"
	}
	return s
}

// ruleMatches says what a canonical rule admits: a name as requested, or
// the addresses a dial tries.
func ruleMatches(rule string) string {
	i := strings.LastIndexByte(rule, ':')
	if i < 0 {
		return "-"
	}
	host := strings.Trim(rule[:i], "[]")
	if net.ParseIP(host) != nil || strings.Contains(host, "/") {
		return "addresses"
	}
	return "the name (its addresses need address rules)"
}

func setupTCPCreate(fs *flag.FlagSet) action {
	id := fs.String("id", "", "channel `ID` (letters, digits, - _ .); default: the next number")
	return func(ctx context.Context, a *app, args []string) error {
		host, portText, err := net.SplitHostPort(args[0])
		if err != nil || host == "" {
			return usagef("tcp create: want HOST:PORT (an IPv6 address in brackets), got %q", args[0])
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil || port == 0 {
			return usagef("tcp create: port %q: want 1–65535", portText)
		}
		c, err := a.clients()
		if err != nil {
			return err
		}
		// The daemon answers once the dial is done: allow for it.
		rctx, cancel := context.WithTimeout(ctx, a.timeout+tcpDialTimeout)
		defer cancel()
		res, err := c.tcp.CreateTCP(rctx, &ahpv1.CreateTCPRequest{Host: host, Port: uint32(port), Id: *id})
		if msg, ok := connectFailed(err); ok {
			return fmt.Errorf("tcp create: %s", msg) // the message names the target
		}
		if err != nil {
			return tcpUsage("create", err)
		}
		fmt.Fprintln(a.stdout, res.Channel.Uri)
		return nil
	}
}

package ctl

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// rootCommand is ahpctl's command tree.
func rootCommand() *command {
	return &command{sub: []*command{
		{name: "status", summary: "Show the daemon's version, addresses and health", maxArgs: 0, setup: setupStatus,
			examples: []string{"ahpctl status", "ahpctl status -o json"}},
		{name: "daemon", summary: "Manage the daemon itself", sub: []*command{
			{name: "upgrade", summary: "Re-execute the daemon in place from a new binary, keeping its terminals", maxArgs: 0, setup: setupDaemonUpgrade,
				help: daemonUpgradeHelp},
		}},
		{name: "ls", summary: "List the channels (the same as channels list)", maxArgs: 0, setup: setupChannelsList,
			examples: []string{"ahpctl ls", "ahpctl ls -o wide", "ahpctl -o yaml ls --type terminal"}},
		{name: "channels", aliases: []string{"channel", "ch"}, summary: "List, describe and close channels", sub: []*command{
			{name: "list", aliases: []string{"ls"}, summary: "List the channels", maxArgs: 0, setup: setupChannelsList,
				examples: []string{"ahpctl channels list", "ahpctl channels list --type terminal -o json", "ahpctl channels list --type tcp"}},
			{name: "get", args: "URI", summary: "Describe a channel and who views it", minArgs: 1, maxArgs: 1, complete: "channel", setup: setupChannelsGet,
				examples: []string{"ahpctl channels get ahp-terminal:/shell -o json"}},
			{name: "close", aliases: []string{"rm"}, args: "URI", summary: "Close a channel (a terminal's process is hung up)", minArgs: 1, maxArgs: 1, complete: "channel", setup: setupChannelsClose,
				help:     "A terminal's process group gets --signal first (if given), then up to --grace to exit,\nthen the PTY is hung up (SIGHUP, then SIGKILL after the daemon's kill timeout).",
				examples: []string{"ahpctl channels close ahp-terminal:/build", "ahpctl channels close ahp-terminal:/build --signal INT --grace 5s"}},
		}},
		{name: "terminal", aliases: []string{"terminals", "term"}, summary: "Create and resize terminals", sub: []*command{
			{name: "create", args: "[--] [CMD [ARG...]]", summary: "Start a terminal and print its channel URI", maxArgs: -1, rawTail: true, complete: "shell", setup: setupTerminalCreate,
				help:     "Without CMD it runs the daemon user's login shell. Everything after the first\nargument that is not a flag is the command line. The working directory defaults\nto ahpctl's current directory (like tmux new-session).\n\n--record records the terminal's output from its first byte (docs/recording.md;\nahpctl recordings list shows it); --record=output+input records what is typed\ntoo, passwords included, so only ask for it when you mean it. Write the mode\nwith \"=\": a word after a lone --record is the command. Without --record the\ndaemon's config key record decides (default off).",
				examples: []string{"ahpctl terminal create", "ahpctl terminal create --id build --rows 40 --cols 120 -- make -j8", "ahpctl terminal create --env TERM=xterm --cwd /srv -- htop", "ahpctl terminal create --id audit --record", "ahpctl terminal create --record=output+input -- bash"}},
			{name: "resize", args: "URI", summary: "Resize a terminal", minArgs: 1, maxArgs: 1, complete: "channel", setup: setupTerminalResize,
				examples: []string{"ahpctl terminal resize ahp-terminal:/build --rows 50 --cols 160"}},
			{name: "record", args: "URI on|off", summary: "Start or stop recording a terminal", minArgs: 2, maxArgs: 2, complete: "channel", setup: setupTerminalRecord,
				help:     terminalRecordHelp,
				examples: []string{"ahpctl terminal record shell on", "ahpctl terminal record ahp-terminal:/build on --input", "ahpctl terminal record shell off"}},
		}},
		recordingsCommand(),
		tcpCommand(),
		telemetryCommand(),
		{name: "token", aliases: []string{"tokens"}, summary: "Mint, list and revoke viewer tokens", sub: []*command{
			{name: "create", summary: "Mint a token and print it alone on one line", maxArgs: 0, setup: setupTokenCreate,
				help:     "The secret is shown once. Tokens live in the daemon's memory only: a restart\nrevokes them. Without --channel the token reaches every channel.",
				examples: []string{"ahpctl token create --channel ahp-terminal:/shell --role view --ttl 1h", "ahpctl token create --single-use --role control"}},
			{name: "list", aliases: []string{"ls"}, summary: "List live tokens (never their secrets)", maxArgs: 0, setup: setupTokenList,
				help:     "Oldest first. A page's reconnect token whose channels are all gone is left\nout; in the table another token's channel that does not exist now is marked\n(no such channel): a token may name a channel before it is created.",
				examples: []string{"ahpctl token list -o json"}},
			{name: "revoke", aliases: []string{"rm"}, args: "ID", summary: "Revoke a token", minArgs: 1, maxArgs: 1, complete: "token", setup: setupTokenRevoke,
				examples: []string{"ahpctl token revoke tok-3"}},
		}},
		{name: "limits", aliases: []string{"limit"}, summary: "Show and change the daemon's limits (PROTOCOL.md §9)", sub: []*command{
			{name: "get", args: "[KEY]", summary: "Show the limits in force and their defaults (or one KEY's)", maxArgs: 1, setup: setupLimitsGet,
				examples: []string{"ahpctl limits get", "ahpctl limits get maxBufferedBytes", "ahpctl limits get -o json", "ahpctl limits get --channel ahp-terminal:/build"}},
			{name: "set", args: "KEY=VALUE...", summary: "Change limits", minArgs: 1, maxArgs: -1, complete: "limit", setup: setupLimitsSet,
				help: "Durations use Go syntax (500ms, 2s, 1m30s); sizes are integers with an optional\nunit, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000: 8MB is\n8,000,000 bytes, 8MiB 8,388,608); VALUE \"default\" (or 0) restores the default. The change\napplies at once to new connections and to the timers of existing ones; the\nresult is validated as a whole and nothing changes if a value is refused (exit\n2). It prints each limit that changed as KEY=VALUE (was OLD), or \"no change\".\nWith --channel, only the flow-control limits (clientReceiveDefaults.*,\nclientReceiveMaximums.*, hostReceive.*) may be set, for new subscriptions of\nthat channel; KEY=default removes the channel's override.\nKeys: " + limitKeyNames() + ".",
				examples: []string{"ahpctl limits set maxOutputStall=2s maxBufferedBytes=8MiB", "ahpctl limits set maxSubscriptions=2 heartbeatInterval=5s", "ahpctl limits set clientReceiveDefaults.windowBytes=256KiB",
					"ahpctl limits set --channel ahp-terminal:/build clientReceiveMaximums.windowBytes=1MiB",
					"ahpctl limits set --channel ahp-terminal:/build clientReceiveMaximums.windowBytes=default"}},
		}},
		{name: "viewers", aliases: []string{"viewer"}, summary: "List and disconnect viewer connections", sub: []*command{
			{name: "list", aliases: []string{"ls"}, summary: "List viewer connections and their subscriptions", maxArgs: 0, setup: setupViewersList,
				examples: []string{"ahpctl viewers list", "ahpctl viewers list -o json"}},
			{name: "kick", args: "ID", summary: "Disconnect a viewer (WebSocket close 1008 with the reason)", minArgs: 1, maxArgs: 1, complete: "viewer", setup: setupViewersKick,
				examples: []string{"ahpctl viewers kick c3 --reason 'maintenance'"}},
		}},
		{name: "stats", summary: "Show traffic counters per connection and per channel", maxArgs: 0, setup: setupStats,
			examples: []string{"ahpctl stats", "ahpctl stats -o json"}},
		{name: "events", summary: "Follow the daemon's events until interrupted", maxArgs: 0, setup: setupEvents,
			help:     eventsHelp,
			examples: []string{"ahpctl events", "ahpctl events -o json --kind viewer.kicked --kind viewer.stalled", "ahpctl events --count 1 --kind channel.created", "ahpctl events --after 120"}},
		{name: "attach", args: "URI", summary: "Attach this terminal to a terminal channel (Ctrl-] d detaches)", minArgs: 1, maxArgs: 1, complete: "channel", setup: setupAttach,
			help:     attachHelp,
			examples: []string{"ahpctl attach ahp-terminal:/shell", "ahpctl attach shell", "ahpctl attach --read-only --detach-keys ctrl-a build", "ahpctl attach --url https://gw.example --token-file ~/.ahp-token --predict always shell"}},
		{name: "forward", args: "LOCAL_ADDR HOST:PORT|URI", summary: "Forward local TCP connections through the daemon to HOST:PORT or a TCP channel", minArgs: 2, maxArgs: 2, setup: setupForward,
			help:     forwardHelp,
			examples: []string{"ahpctl forward 8080 127.0.0.1:80", "ahpctl forward 127.0.0.1:5433 db.internal:5432 --quiet", "ahpctl forward 9000 ahp-tcp:/3", "ahpctl forward --url http://gw:7681 --token-file ~/.ahp-token 8080 10.0.0.5:80"}},
		{name: "open", args: "[URI]", summary: "Print a browser URL with a single-use ticket", maxArgs: 1, complete: "channel", setup: setupOpen,
			help:     "The ticket is in the URL fragment, which browsers never send to a server; it\nworks once and expires after the daemon's ticket TTL (default 10 minutes).\nWithout URI (or with --all) the ticket covers every channel and the page\nopens on its channel list.",
			examples: []string{"ahpctl open ahp-terminal:/shell", "ahpctl open shell", "ahpctl open --browser --role view ahp-terminal:/build", "ahpctl open --all", "ahpctl open --share --ttl 8h --role view build"}},
		{name: "completion", args: "bash|zsh|fish", summary: "Print a shell completion script", minArgs: 1, maxArgs: 1, setup: setupCompletion,
			examples: []string{"source <(ahpctl completion bash)", "ahpctl completion zsh > \"${fpath[1]}/_ahpctl\"", "ahpctl completion fish > ~/.config/fish/completions/ahpctl.fish"}},
		{name: "version", summary: "Print ahpctl's version", maxArgs: 0, setup: func(*flag.FlagSet) action {
			return func(_ context.Context, a *app, _ []string) error {
				fmt.Fprintln(a.stdout, "ahpctl", Version)
				return nil
			}
		}},
		{name: "__complete", hidden: true, args: "channels|viewers|tokens|limits|tcprules|recordings", minArgs: 1, maxArgs: 1, setup: setupComplete},
	}}
}

func setupStatus(fs *flag.FlagSet) action {
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
		info, err := c.daemon.GetInfo(rctx, &ahpv1.GetInfoRequest{})
		if err != nil {
			return err
		}
		health := "UNKNOWN"
		if h, err := healthpb.NewHealthClient(a.cc).Check(rctx, &healthpb.HealthCheckRequest{}); err == nil {
			health = h.Status.String()
		}
		// The next step: a link command, since the bare web page asks for a
		// ticket.
		open := "ahpctl open"
		if lres, err := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{Type: "terminal"}); err == nil && len(lres.Channels) > 0 {
			open += " " + lres.Channels[0].Uri
			for _, ch := range lres.Channels {
				if ch.Uri == "ahp-terminal:/shell" { // the default terminal
					open = "ahpctl open " + ch.Uri
				}
			}
		}
		v := statusView{Open: open,
			Version: info.Version, Health: health, Pid: info.Pid, Listen: info.ListenAddress, BaseURL: info.BaseUrl,
			WebSocketURL: info.WebsocketUrl, Control: info.ControlSocket, StateDir: info.StateDir,
			Started: info.StartTime.AsTime(), Uptime: time.Since(info.StartTime.AsTime()).Round(time.Second).String(),
			Compression: info.WebsocketCompression, Channels: info.Channels, Connections: info.Connections,
			Upgrades: info.Upgrades,
		}
		upgraded := "never"
		if info.UpgradeTime != nil {
			t := info.UpgradeTime.AsTime()
			v.Upgraded = &t
			upgraded = fmt.Sprintf("%s ago (%d upgrades)", time.Since(t).Round(time.Second), info.Upgrades)
		}
		rows := [][2]any{{"version", v.Version}, {"health", v.Health}, {"pid", v.Pid}, {"uptime", v.Uptime}, {"upgraded", upgraded}}
		if r := info.UpgradeRefused; r != nil {
			v.UpgradeRefused = &refusalView{Time: r.Time.AsTime(), Reason: r.Reason, AfterHandOver: r.AfterHandOver}
			what := "before the hand-over"
			if r.AfterHandOver {
				what = "after the hand-over; channels taken back"
			}
			rows = append(rows, [2]any{"upgrade refused", fmt.Sprintf("%s ago (%s): %s", time.Since(v.UpgradeRefused.Time).Round(time.Second), what, strings.ReplaceAll(r.Reason, "\n", " "))})
		}
		if structured(*o) {
			return a.printAs(*o, v)
		}
		tw := a.table()
		for _, kv := range append(rows, [][2]any{
			{"listen", v.Listen}, {"web page", v.BaseURL + " (needs a ticket: see below)"}, {"websocket", v.WebSocketURL}, {"compression", v.Compression},
			{"control socket", v.Control}, {"state dir", v.StateDir}, {"channels", v.Channels}, {"connections", v.Connections},
		}...) {
			fmt.Fprintf(tw, "%s:\t%v\n", kv[0], kv[1])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nOpen in a browser: %s   (prints a link with a single-use ticket)\n", v.Open)
		return nil
	}
}

func setupChannelsList(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	typ := fs.String("type", "", "only channels of this `type`: terminal, telemetry or tcp")
	return func(ctx context.Context, a *app, _ []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		if *typ != "" && !slices.Contains(channelTypes, *typ) {
			return usagef("--type must be %s, got %q", strings.Join(channelTypes, ", "), *typ)
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{Type: *typ})
		if err != nil {
			return err
		}
		views := make([]channelView, 0, len(res.Channels))
		for _, ch := range res.Channels {
			views = append(views, toChannelView(ch))
		}
		if structured(*o) {
			return a.printAs(*o, views)
		}
		return a.printChannels(views, *o == "wide", *typ)
	}
}

func setupChannelsGet(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		uri, err := a.channelURI(ctx, args[0])
		if err != nil {
			return err
		}
		res, err := c.channels.GetChannel(rctx, &ahpv1.GetChannelRequest{Channel: uri})
		if err != nil {
			return err
		}
		v := channelDetailView{channelView: toChannelView(res.Channel), Subscribers: []channelSubscriberView{}}
		// Who views it: the viewer connections with a subscription to it.
		if vres, err := c.viewers.ListViewers(rctx, &ahpv1.ListViewersRequest{}); err == nil {
			for _, vw := range vres.Viewers {
				for _, sub := range vw.Subscriptions {
					if sub.Channel == v.Channel {
						v.Subscribers = append(v.Subscribers, channelSubscriberView{Viewer: vw.Id, Client: vw.Client, Role: roleName(vw.Role), Remote: vw.RemoteAddress, Subscription: sub.Id, Stalled: sub.Stalled})
					}
				}
			}
		}
		if structured(*o) {
			return a.printAs(*o, v)
		}
		return a.printChannelDetail(v)
	}
}

func setupChannelsClose(fs *flag.FlagSet) action {
	sig := fs.String("signal", "", "send this `signal` (TERM, INT, KILL, a number) to a terminal's process group first")
	grace := fs.Duration("grace", 0, "after --signal, wait up to this `duration` for the process to exit (at most 60s)")
	return func(ctx context.Context, a *app, args []string) error {
		if *grace != 0 && *sig == "" {
			return usagef("channels close: --grace needs --signal")
		}
		c, err := a.clients()
		if err != nil {
			return err
		}
		uri, err := a.channelURI(ctx, args[0])
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, a.timeout+*grace)
		defer cancel()
		_, err = c.channels.CloseChannel(rctx, &ahpv1.CloseChannelRequest{Channel: uri, Signal: *sig, Grace: durationpb.New(*grace)})
		return err
	}
}

func setupTerminalCreate(fs *flag.FlagSet) action {
	id := fs.String("id", "", "channel `ID` (letters, digits, - _ .); default: the next number")
	title := fs.String("title", "", "`title` shown by viewers until the program sets one")
	rows := fs.Int("rows", 0, "height in `cells` (default 24)")
	cols := fs.Int("cols", 0, "width in `cells` (default 80)")
	cwd := fs.String("cwd", "", "working `directory` (default: ahpctl's current directory)")
	var env stringList
	fs.Var(&env, "env", "add `KEY=VALUE` to the environment (repeatable)")
	clearEnv := fs.Bool("clear-env", false, "start with only the --env entries, not the daemon's environment")
	scrollback := fs.Int("scrollback", 0, "scrollback `lines` kept for snapshots (default 10000, -1 none)")
	var record recordFlag
	fs.Var(&record, "record", "record the terminal: --record (output) or --record=output+input (what is typed too, passwords included); --record=off overrides the daemon's default")
	return func(ctx context.Context, a *app, args []string) error {
		dir := *cwd
		if dir == "" {
			dir, _ = os.Getwd()
		} else if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		req := &ahpv1.CreateTerminalRequest{
			Id: *id, Title: *title, Rows: int32(*rows), Cols: int32(*cols), Cwd: dir,
			Env: env, ClearEnv: *clearEnv, Scrollback: int32(*scrollback), Record: record.mode,
		}
		if len(args) > 0 {
			req.Command, req.Args = args[0], args[1:]
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		res, err := c.terminals.CreateTerminal(rctx, req)
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, res.Channel.Uri)
		return nil
	}
}

func setupTerminalResize(fs *flag.FlagSet) action {
	rows := fs.Int("rows", 0, "height in `cells` (required, at least 1)")
	cols := fs.Int("cols", 0, "width in `cells` (required, at least 1)")
	return func(ctx context.Context, a *app, args []string) error {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, f := range []struct {
			name string
			v    int
		}{{"cols", *cols}, {"rows", *rows}} {
			switch {
			case !given[f.name]:
				return usagef("terminal resize: --%s is required (--cols and --rows, each at least 1)", f.name)
			case f.v < 1:
				return usagef("terminal resize: --%s must be at least 1, got %d", f.name, f.v)
			}
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		uri, err := a.channelURIOf(ctx, args[0], "terminal")
		if err != nil {
			return err
		}
		_, err = c.terminals.ResizeTerminal(rctx, &ahpv1.ResizeTerminalRequest{Channel: uri, Rows: int32(*rows), Cols: int32(*cols)})
		return err
	}
}

func parseRole(s string) (ahpv1.Role, error) {
	switch s {
	case "view":
		return ahpv1.Role_ROLE_VIEW, nil
	case "control":
		return ahpv1.Role_ROLE_CONTROL, nil
	}
	return 0, usagef("--role must be view or control, got %q", s)
}

func roleName(r ahpv1.Role) string {
	switch r {
	case ahpv1.Role_ROLE_VIEW:
		return "view"
	case ahpv1.Role_ROLE_CONTROL:
		return "control"
	}
	return "-"
}

func setupTokenCreate(fs *flag.FlagSet) action {
	var channels stringList
	fs.Var(&channels, "channel", "channel `URI` the token reaches (repeatable; default: every channel)")
	role := fs.String("role", "view", "`role`: view (output only) or control (input and resize too)")
	ttl := fs.Duration("ttl", 0, "lifetime (default 24h for a token, the daemon's ticket TTL for --single-use)")
	single := fs.Bool("single-use", false, "mint a ticket that works for one connection")
	return func(ctx context.Context, a *app, _ []string) error {
		r, err := parseRole(*role)
		if err != nil {
			return err
		}
		if *ttl < 0 {
			return usagef("token create: --ttl must not be negative")
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		uris, err := a.channelURIs(ctx, channels)
		if err != nil {
			return err
		}
		req := &ahpv1.CreateTokenRequest{Channels: uris, Role: r, SingleUse: *single}
		if *ttl > 0 {
			req.Ttl = durationpb.New(*ttl)
		}
		res, err := c.tokens.CreateToken(rctx, req)
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, res.Secret)
		return nil
	}
}

func setupTokenList(fs *flag.FlagSet) action {
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
		res, err := c.tokens.ListTokens(rctx, &ahpv1.ListTokensRequest{})
		if err != nil {
			return err
		}
		// Oldest first (the daemon lists in creation order; an older one
		// by id): by the ids' number, which count up.
		sortTokens(res.Tokens)
		// A reconnect token (parent_id set: a page's, derived from a
		// ticket) whose channels are all gone is of no use and is left
		// out; any other token naming a missing channel is marked, since
		// a token may name a channel before it is created.
		open := map[string]bool{}
		lres, lerr := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{})
		if lerr == nil {
			for _, ch := range lres.Channels {
				open[ch.Uri] = true
			}
		}
		views := make([]tokenView, 0, len(res.Tokens))
		for _, t := range res.Tokens {
			if lerr == nil && t.GetParentId() != "" && len(t.Channels) > 0 && !slices.ContainsFunc(t.Channels, func(ch string) bool { return open[ch] }) {
				continue
			}
			views = append(views, toTokenView(t))
		}
		if structured(*o) {
			return a.printAs(*o, views)
		}
		tw := a.table("ID", "ROLE", "CHANNELS", "EXPIRES", "SINGLE-USE")
		for _, t := range views {
			var names []string
			for _, ch := range t.Channels {
				if lerr == nil && !open[ch] {
					ch += " (no such channel)"
				}
				names = append(names, ch)
			}
			chs := strings.Join(names, ",")
			if chs == "" {
				chs = "*"
			}
			exp := "never"
			if t.Expires != nil {
				exp = t.Expires.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", t.ID, t.Role, chs, exp, t.SingleUse)
		}
		return tw.Flush()
	}
}

func sortTokens(ts []*ahpv1.Token) {
	slices.SortStableFunc(ts, func(x, y *ahpv1.Token) int { return cmpTokenIDs(x.Id, y.Id) })
}

// cmpTokenIDs orders token ids by their number (tok-2 before tok-10), then
// as strings.
func cmpTokenIDs(a, b string) int {
	na, ea := strconv.Atoi(strings.TrimPrefix(a, "tok-"))
	nb, eb := strconv.Atoi(strings.TrimPrefix(b, "tok-"))
	if ea == nil && eb == nil && na != nb {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

func setupTokenRevoke(*flag.FlagSet) action {
	return func(ctx context.Context, a *app, args []string) error {
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		_, err = c.tokens.RevokeToken(rctx, &ahpv1.RevokeTokenRequest{Id: args[0]})
		return err
	}
}

func setupLimitsGet(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	channel := fs.String("channel", "", "show the limits a new subscription of channel `URI` gets (with its overrides)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		keys := limitKeys
		if len(args) == 1 {
			k, ok := findLimitKey(args[0])
			if !ok {
				return usagef("limits get: unknown key %q%s (keys: %s)", args[0], didYouMean(args[0], limitKeyNameList()), limitKeyNames())
			}
			keys = []limitKey{k}
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		uri := *channel
		if uri != "" {
			if uri, err = a.channelURI(ctx, uri); err != nil {
				return err
			}
		}
		res, err := c.limits.GetLimits(rctx, &ahpv1.GetLimitsRequest{Channel: uri})
		if err != nil {
			return err
		}
		if len(args) == 1 && structured(*o) {
			k := keys[0]
			return a.printAs(*o, limitValueView{Key: k.name, Value: formatLimit(k.kind, k.get(res.Effective)),
				Default: formatLimit(k.kind, k.get(res.Defaults)), Overridden: slices.Contains(res.Overridden, k.name)})
		}
		if structured(*o) {
			return a.printAs(*o, map[string]any{"effective": toLimitsView(res.Effective), "defaults": toLimitsView(res.Defaults), "overridden": res.Overridden})
		}
		tw := a.table("KEY", "VALUE", "DEFAULT")
		for _, k := range keys {
			v := formatLimit(k.kind, k.get(res.Effective))
			if slices.Contains(res.Overridden, k.name) {
				v += " (channel)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k.name, v, formatLimit(k.kind, k.get(res.Defaults)))
		}
		return tw.Flush()
	}
}

func setupLimitsSet(fs *flag.FlagSet) action {
	channel := fs.String("channel", "", "override flow-control limits for channel `URI` only (KEY=default removes an override)")
	return func(ctx context.Context, a *app, args []string) error {
		req, err := parseLimitAssignments(args)
		if err != nil {
			return err
		}
		if *channel != "" {
			if req.Channel, err = a.channelURI(ctx, *channel); err != nil {
				return err
			}
			defaults := 0
			for _, arg := range args {
				if strings.HasSuffix(arg, "=default") {
					defaults++
				}
			}
			switch defaults {
			case 0:
			case len(args):
				req.Clear = true
			default:
				return usagef("limits set --channel: set values and remove overrides (KEY=default) in separate calls")
			}
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		// The values before, to show what changed (best effort: a daemon
		// that cannot say still gets the change).
		var before *ahpv1.Limits
		if old, err := c.limits.GetLimits(rctx, &ahpv1.GetLimitsRequest{Channel: req.Channel}); err == nil {
			before = old.Effective
		}
		res, err := c.limits.SetLimits(rctx, req)
		if err != nil {
			return err
		}
		if len(res.Changed) == 0 {
			fmt.Fprintln(a.stdout, "no change: the limits already had those values")
			return nil
		}
		for _, name := range res.Changed {
			k, _ := findLimitKey(name)
			line := name + "=" + formatLimit(k.kind, k.get(res.Effective))
			if before != nil {
				line += " (was " + formatLimit(k.kind, k.get(before)) + ")"
			}
			fmt.Fprintln(a.stdout, line)
		}
		return nil
	}
}

func setupViewersList(fs *flag.FlagSet) action {
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
		res, err := c.viewers.ListViewers(rctx, &ahpv1.ListViewersRequest{})
		if err != nil {
			return err
		}
		views := make([]viewerView, 0, len(res.Viewers))
		for _, v := range res.Viewers {
			views = append(views, toViewerView(v))
		}
		if structured(*o) {
			return a.printAs(*o, views)
		}
		return a.printViewers(views)
	}
}

func setupViewersKick(fs *flag.FlagSet) action {
	reason := fs.String("reason", "", "`reason` sent in the close frame (at most 123 bytes; default \"disconnected by operator\")")
	return func(ctx context.Context, a *app, args []string) error {
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		// Who it was, for the line below (best effort).
		who := ""
		if vres, err := c.viewers.ListViewers(rctx, &ahpv1.ListViewersRequest{}); err == nil {
			for _, v := range vres.Viewers {
				if v.Id == args[0] {
					who = fmt.Sprintf(" (%s from %s)", dash(v.Client), v.RemoteAddress)
				}
			}
		}
		if _, err = c.viewers.DisconnectViewer(rctx, &ahpv1.DisconnectViewerRequest{Id: args[0], Reason: *reason}); err != nil {
			return err
		}
		why := *reason
		if why == "" {
			why = "disconnected by operator"
		}
		fmt.Fprintf(a.stdout, "kicked viewer %s%s: closed with 1008 %q\n", args[0], who, why)
		return nil
	}
}

func setupStats(fs *flag.FlagSet) action {
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
		res, err := c.daemon.GetStats(rctx, &ahpv1.GetStatsRequest{})
		if err != nil {
			return err
		}
		v := toStatsView(res)
		if structured(*o) {
			return a.printAs(*o, v)
		}
		return a.printStats(v)
	}
}

const eventsHelp = `Each event has a seq, numbered from 1 by the daemon (-o json prints it); it
goes on across an upgrade in place, and a restart starts it anew. When the
daemon upgrades in place, ahpctl events resumes after the last event it
printed: nothing is printed twice, and what the daemon no longer keeps (it
keeps its newest 1024 events) is reported lost. --after SEQ starts after a
seq seen earlier in the same way.`

// eventsResume bounds how long ahpctl events tries to resume its watch
// once the daemon ended it (an upgrade in place takes about a second; a
// daemon that stops is not waited for longer).
const eventsResume = 10 * time.Second

func setupEvents(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	after := fs.Uint64("after", 0, "start after the event of this `SEQ` (one printed before): the events after it that the daemon still keeps (its newest 1024) come first; without it, or 0, only the events from now on")
	var kinds stringList
	fs.Var(&kinds, "kind", "only events of this `kind` (repeatable): "+strings.Join(eventKinds, ", "))
	channel := fs.String("channel", "", "only events about this channel `URI`")
	count := fs.Int("count", 0, "exit after this many events (default: follow until interrupted)")
	return func(ctx context.Context, a *app, _ []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		if *count < 0 {
			return usagef("events: --count must not be negative")
		}
		for _, k := range kinds {
			if !slices.Contains(eventKinds, k) {
				return usagef("events: unknown --kind %q (kinds: %s)", k, strings.Join(eventKinds, ", "))
			}
		}
		c, err := a.clients()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		uri := *channel
		if uri != "" {
			if uri, err = a.channelURI(ctx, uri); err != nil {
				return err
			}
		}
		last, seen := *after, 0
		var ended time.Time // when the daemon ended the watch, if it did
		for {
			stream, err := c.daemon.WatchEvents(ctx, &ahpv1.WatchEventsRequest{Kinds: kinds, Channel: uri, AfterSeq: last})
			for err == nil {
				var res *ahpv1.WatchEventsResponse
				if res, err = stream.Recv(); err != nil {
					break
				}
				ended = time.Time{}
				last = max(last, res.LastSeq)
				if res.Lost > 0 {
					fmt.Fprintf(a.stderr, "ahpctl: %d events lost (this watcher fell behind, or the daemon no longer had them)\n", res.Lost)
				}
				for _, e := range res.Events {
					last = max(last, e.Seq)
					v := eventView{Seq: e.Seq, Time: e.Time.AsTime(), Kind: e.Kind, Channel: e.Channel, Viewer: e.Viewer, Detail: e.Detail}
					switch *o {
					case "json":
						err = a.printJSONLine(v)
					case "yaml": // a stream of documents
						fmt.Fprintln(a.stdout, "---")
						err = a.printAs("yaml", v)
					default:
						fmt.Fprintf(a.stdout, "%s  %-15s %-24s %-6s %s\n", v.Time.Local().Format("15:04:05.000"), v.Kind, dash(v.Channel), dash(v.Viewer), v.Detail)
					}
					if err != nil {
						return err
					}
					if seen++; *count > 0 && seen >= *count {
						return nil
					}
				}
			}
			if ctx.Err() != nil {
				return nil // interrupted
			}
			// The daemon ended the watch (an upgrade in place, or it is
			// stopping): resume after the last event, for a while.
			if status.Code(err) != codes.Unavailable {
				return err
			}
			if ended.IsZero() {
				ended = time.Now()
			} else if time.Since(ended) > eventsResume {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// channelTypes are the values of ListChannelsRequest.type.
var channelTypes = []string{"terminal", "telemetry", "tcp"}

// eventKinds are the kinds WatchEvents sends (daemon.proto, Event.kind).
var eventKinds = []string{"channel.created", "channel.exited", "channel.closed", "viewer.joined", "viewer.left", "viewer.stalled", "viewer.kicked", "viewer.input", "limits.changed",
	"recording.started", "recording.stopped", "recording.dropped"}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func setupOpen(fs *flag.FlagSet) action {
	browser := fs.Bool("browser", false, "also open the URL with xdg-open (or $BROWSER)")
	role := fs.String("role", "control", "`role` of the ticket: view or control")
	all := fs.Bool("all", false, "a link whose ticket covers every channel (the default without URI)")
	share := fs.Bool("share", false, "a reusable share link (a token, for any number of tabs) instead of a single-use ticket; its id (for token revoke) goes to stderr")
	fs.BoolVar(share, "reusable", false, "the same as --share")
	ttl := fs.Duration("ttl", 0, "lifetime of a --share link (default 1h)")
	return func(ctx context.Context, a *app, args []string) error {
		r, err := parseRole(*role)
		if err != nil {
			return err
		}
		if *all && len(args) > 0 {
			return usagef("open: --all or a URI, not both")
		}
		if *ttl != 0 && !*share {
			return usagef("open: --ttl needs --share (a single-use ticket has the daemon's ticket TTL)")
		}
		if *ttl < 0 {
			return usagef("open: --ttl must not be negative")
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		var uri string // empty: every channel
		if len(args) > 0 {
			if uri, err = a.channelURI(ctx, args[0]); err != nil {
				return err
			}
		}
		req := &ahpv1.CreateBrowserLinkRequest{Channel: uri, Role: r, Reusable: *share}
		if *ttl > 0 {
			req.Ttl = durationpb.New(*ttl)
		}
		res, err := c.tokens.CreateBrowserLink(rctx, req)
		if status.Code(err) == codes.NotFound && uri == "" && !*share {
			// An older daemon wants a channel: the same link from its
			// parts.
			var url string
			if url, err = allChannelsLink(rctx, c, r); err == nil {
				res = &ahpv1.CreateBrowserLinkResponse{Url: url}
			}
		}
		if err != nil {
			return err
		}
		url := res.Url
		fmt.Fprintln(a.stdout, url)
		if *share && res.TokenId != "" {
			fmt.Fprintf(a.stderr, "ahpctl: share link %s expires %s; revoke it with: ahpctl token revoke %s\n", res.TokenId, res.ExpireTime.AsTime().Local().Format(time.DateTime), res.TokenId)
		}
		if *browser {
			return openBrowser(a.getenv, url)
		}
		return nil
	}
}

// allChannelsLink is the web page URL with a single-use ticket over every
// channel (the page then shows its channel list), for a daemon whose
// CreateBrowserLink needs a channel: a ticket from CreateToken (the
// daemon's ticket TTL) and the base URL from GetInfo, in the form the
// daemon prints at start (http://HOST:PORT/#ticket=T).
func allChannelsLink(ctx context.Context, c *clients, r ahpv1.Role) (string, error) {
	info, err := c.daemon.GetInfo(ctx, &ahpv1.GetInfoRequest{})
	if err != nil {
		return "", err
	}
	tok, err := c.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{Role: r, SingleUse: true})
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(info.BaseUrl, "/") + "/#ticket=" + tok.Secret, nil
}

// openBrowser starts $BROWSER or the platform's opener, without waiting.
func openBrowser(getenv func(string) string, url string) error {
	name := getenv("BROWSER")
	if name == "" {
		name = "xdg-open"
		if runtime.GOOS == "darwin" {
			name = "open"
		}
	}
	cmd := exec.Command(name, url)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open the browser with %s: %w (the URL is printed above)", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// setupComplete prints completion candidates fetched from the daemon; it
// prints nothing (and exits 0) when the daemon cannot be reached.
func setupComplete(*flag.FlagSet) action {
	return func(ctx context.Context, a *app, args []string) error {
		c, err := a.clients()
		if err != nil {
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		switch args[0] {
		case "channels":
			if res, err := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{}); err == nil {
				for _, ch := range res.Channels {
					fmt.Fprintln(a.stdout, ch.Uri)
				}
			}
		case "viewers":
			if res, err := c.viewers.ListViewers(rctx, &ahpv1.ListViewersRequest{}); err == nil {
				for _, v := range res.Viewers {
					fmt.Fprintln(a.stdout, v.Id)
				}
			}
		case "tokens":
			if res, err := c.tokens.ListTokens(rctx, &ahpv1.ListTokensRequest{}); err == nil {
				for _, t := range res.Tokens {
					fmt.Fprintln(a.stdout, t.Id)
				}
			}
		case "limits":
			for _, k := range limitKeys {
				fmt.Fprintln(a.stdout, k.name+"=")
			}
		case "recordings":
			if res, err := c.recordings.ListRecordings(rctx, &ahpv1.ListRecordingsRequest{}); err == nil {
				for _, r := range res.Recordings {
					fmt.Fprintln(a.stdout, r.Id)
				}
			}
		case "tcprules":
			if res, err := c.tcp.ListTCPRules(rctx, &ahpv1.ListTCPRulesRequest{}); err == nil {
				for _, r := range res.Rules {
					fmt.Fprintln(a.stdout, r)
				}
			}
		}
		return nil
	}
}

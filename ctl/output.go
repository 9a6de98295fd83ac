package ctl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// The JSON views of -o json: stable field names (those of PROTOCOL.md
// where it names them), sizes as integers, durations in Go syntax.

type statusView struct {
	Version      string    `json:"version"`
	Health       string    `json:"health"`
	Pid          int64     `json:"pid"`
	Listen       string    `json:"listen"`
	BaseURL      string    `json:"baseUrl"`
	WebSocketURL string    `json:"websocketUrl"`
	Control      string    `json:"controlSocket"`
	StateDir     string    `json:"stateDir"`
	Started      time.Time `json:"started"`
	Uptime       string    `json:"uptime"`
	// Upgraded is when the daemon last upgraded in place (absent if it
	// never did); Upgrades counts its upgrades since Started.
	Upgraded *time.Time `json:"upgraded,omitempty"`
	Upgrades int64      `json:"upgrades"`
	// UpgradeRefused is the last upgrade in place refused since Started
	// (absent if none was).
	UpgradeRefused *refusalView `json:"upgradeRefused,omitempty"`
	Compression    string       `json:"websocketCompression"`
	Channels       int64        `json:"channels"`
	Connections    int64        `json:"connections"`
	// Open is the command that prints a browser link (the web page needs
	// a ticket).
	Open string `json:"open"`
}

// refusalView is an upgrade in place that was refused: when, why, and
// whether the daemon had handed over already (and took its channels
// back: its viewers reconnected).
type refusalView struct {
	Time          time.Time `json:"time"`
	Reason        string    `json:"reason"`
	AfterHandOver bool      `json:"afterHandOver"`
}

type channelView struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	State   string `json:"state"`
	Viewers int64  `json:"viewers"`
	Rows    int32  `json:"rows,omitempty"`
	Cols    int32  `json:"cols,omitempty"`
	Pid     int64  `json:"pid,omitempty"`
	// Created is when the channel was created (unset from an older daemon).
	Created *time.Time `json:"created,omitempty"`
	// Command is a terminal's program and arguments.
	Command []string `json:"command,omitempty"`
	// Cwd is the directory a terminal's program started in.
	Cwd string `json:"cwd,omitempty"`
	// Exit is how a terminal's process ended; unset while it runs.
	Exit *channelExitView `json:"exit,omitempty"`
	// TCP is set for TCP channels.
	TCP *tcpChannelView `json:"tcp,omitempty"`
	// Telemetry is set for telemetry channels.
	Telemetry *telemetryChannelView `json:"telemetry,omitempty"`
	// Recording is a terminal's recording (unset for other types and from
	// an older daemon).
	Recording *recordingStateView `json:"recording,omitempty"`
}

// recordingStateView is ahpv1.RecordingState: off, or the mode and the
// file being written.
type recordingStateView struct {
	Mode string `json:"mode"`
	ID   string `json:"id,omitempty"`
}

// channelExitView is ahpv1.ChannelExit: the code, or the signal.
type channelExitView struct {
	Code   int32  `json:"code"`
	Signal string `json:"signal,omitempty"`
}

func (e *channelExitView) String() string {
	switch {
	case e == nil:
		return "-"
	case e.Signal != "":
		return e.Signal
	}
	return fmt.Sprint(e.Code)
}

// telemetryChannelView is a telemetry channel's figures
// (ahpv1.TelemetryChannel).
type telemetryChannelView struct {
	Source  string `json:"source"`           // system, process, command, push, daemon or scrape
	Policy  string `json:"policy"`           // the viewers' overflow policy
	Seq     int64  `json:"nextSeq"`          // the seq the next batch gets
	Samples int64  `json:"samples"`          // published since the channel began
	Status  string `json:"status,omitempty"` // what went wrong with a source that goes on (a scrape's last failure)
}

// tcpChannelView is a TCP channel's figures (ahpv1.TCPChannel).
type tcpChannelView struct {
	Target   string `json:"target"`
	Remote   string `json:"remote"`
	BytesIn  int64  `json:"bytesIn"`  // client→target
	BytesOut int64  `json:"bytesOut"` // target→client
	Resumes  int64  `json:"resumes"`
	Consumer bool   `json:"consumer"`
	Phase    string `json:"phase"`
}

func toChannelView(c *ahpv1.Channel) channelView {
	v := channelView{Channel: c.Uri, ID: c.Id, Type: c.Type, Title: c.Title, State: c.State, Viewers: c.Viewers, Rows: c.Rows, Cols: c.Cols, Pid: c.Pid, Command: c.Command, Cwd: c.Cwd}
	if c.CreateTime != nil {
		t := c.CreateTime.AsTime()
		v.Created = &t
	}
	if e := c.Exit; e != nil {
		v.Exit = &channelExitView{Code: e.Code, Signal: e.Signal}
	}
	if t := c.Tcp; t != nil {
		v.TCP = &tcpChannelView{Target: t.Target, Remote: t.Remote, BytesIn: t.BytesIn, BytesOut: t.BytesOut, Resumes: t.Resumes, Consumer: t.Consumer, Phase: t.Phase}
	}
	if r := c.Recording; r != nil {
		v.Recording = &recordingStateView{Mode: r.Mode, ID: r.Id}
	}
	if t := c.Telemetry; t != nil {
		v.Telemetry = &telemetryChannelView{Source: t.Source, Policy: t.Policy, Seq: t.Seq, Samples: t.Samples, Status: t.Status}
		if v.Telemetry.Policy == "" {
			v.Telemetry.Policy = "drop-oldest" // the default (PROTOCOL.md §8)
		}
	}
	return v
}

// age is how long ago the channel was created, "-" if unknown.
func (c channelView) age() string {
	if c.Created == nil {
		return "-"
	}
	return formatAge(time.Since(*c.Created))
}

// formatAge rounds d to what a listing needs: 45s, 12m, 3h, 2d.
func formatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// detail is a terminal's command line, or the one-line summary of a TCP or
// telemetry channel's figures.
func (c channelView) detail() string {
	switch {
	case len(c.Command) > 0:
		return strings.Join(c.Command, " ")
	case c.TCP != nil:
		return fmt.Sprintf("%s %s in=%d out=%d", c.TCP.Target, strings.ReplaceAll(c.TCP.Phase, " ", ""), c.TCP.BytesIn, c.TCP.BytesOut)
	case c.Telemetry != nil:
		return fmt.Sprintf("%s %s samples=%d", c.Telemetry.Source, c.Telemetry.Policy, c.Telemetry.Samples)
	}
	return "-"
}

// channelDetailView is `channels get`: the channel and the viewer
// connections subscribed to it.
type channelDetailView struct {
	channelView
	Subscribers []channelSubscriberView `json:"subscribers"`
}

type channelSubscriberView struct {
	Viewer       string `json:"viewer"`
	Client       string `json:"client"`
	Role         string `json:"role"`
	Remote       string `json:"remoteAddress"`
	Subscription string `json:"subscriptionId"`
	Stalled      bool   `json:"stalled"`
}

// printChannelDetail prints `channels get` as KEY: VALUE lines, then the
// subscribers.
func (a *app) printChannelDetail(v channelDetailView) error {
	tw := a.table()
	row := func(k string, val any) { fmt.Fprintf(tw, "%s:\t%v\n", k, val) }
	row("channel", v.Channel)
	row("id", v.ID)
	row("type", v.Type)
	row("state", v.State)
	if v.Title != "" {
		row("title", v.Title)
	}
	if v.Rows > 0 {
		row("size", fmt.Sprintf("%dx%d (cols x rows)", v.Cols, v.Rows))
	}
	if v.Pid > 0 {
		row("pid", v.Pid)
	}
	if len(v.Command) > 0 {
		row("command", strings.Join(v.Command, " "))
	}
	if v.Cwd != "" {
		row("cwd", v.Cwd)
	}
	if v.Created != nil {
		row("created", v.Created.Local().Format(time.DateTime)+" ("+v.age()+" ago)")
	}
	if r := v.Recording; r != nil {
		if r.Mode == "off" {
			row("recording", "off")
		} else {
			row("recording", r.Mode+" to "+r.ID+" (ahpctl recordings cat "+r.ID+")")
		}
	}
	if v.Exit != nil {
		if v.Exit.Signal != "" {
			row("exit", "killed by "+v.Exit.Signal)
		} else {
			row("exit", fmt.Sprintf("status %d", v.Exit.Code))
		}
	}
	if t := v.TCP; t != nil {
		row("target", t.Target)
		row("remote", dash(t.Remote))
		row("phase", t.Phase)
		row("consumer", t.Consumer)
		row("bytes in", fmt.Sprintf("%d (written to the target)", t.BytesIn))
		row("bytes out", fmt.Sprintf("%d (read from the target)", t.BytesOut))
		row("resumes", t.Resumes)
	}
	if t := v.Telemetry; t != nil {
		row("source", t.Source)
		row("policy", t.Policy)
		row("samples", t.Samples)
		row("next seq", t.Seq)
	}
	row("viewers", v.Viewers)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Subscribers) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = a.table("VIEWER", "CLIENT", "ROLE", "REMOTE", "SUB", "STALLED")
	for _, s := range v.Subscribers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", s.Viewer, dash(s.Client), s.Role, s.Remote, s.Subscription, s.Stalled)
	}
	return tw.Flush()
}

type tokenView struct {
	ID        string     `json:"id"`
	Role      string     `json:"role"`
	Channels  []string   `json:"channels"` // empty: every channel
	Expires   *time.Time `json:"expires,omitempty"`
	SingleUse bool       `json:"singleUse"`
}

func toTokenView(t *ahpv1.Token) tokenView {
	v := tokenView{ID: t.Id, Role: roleName(t.Role), Channels: t.Channels, SingleUse: t.SingleUse}
	if v.Channels == nil {
		v.Channels = []string{}
	}
	if t.ExpireTime != nil {
		exp := t.ExpireTime.AsTime()
		v.Expires = &exp
	}
	return v
}

// limitsView is ahpv1.Limits as `-o json` shows it: every limit of the
// table in its order, durations as strings ("1m0s"), the flow-control
// groups as objects.
type limitsView struct{ l *ahpv1.Limits }

func toLimitsView(l *ahpv1.Limits) limitsView { return limitsView{l} }

func (v limitsView) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	group := ""
	for i, k := range limitKeys {
		g, member, grouped := k.spec.Group()
		if group != "" && (!grouped || g != group) {
			b = append(b, '}')
			group = ""
		}
		if i > 0 && !(grouped && g == group) {
			b = append(b, ',')
		}
		name := k.name
		if grouped {
			if g != group {
				b = strconv.AppendQuote(b, g)
				b = append(b, ":{"...)
				group = g
			} else {
				b = append(b, ',')
			}
			name = member
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
		if k.kind == kindDuration {
			b = strconv.AppendQuote(b, time.Duration(k.get(v.l)).String())
		} else {
			b = strconv.AppendInt(b, k.get(v.l), 10)
		}
	}
	if group != "" {
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

type subscriptionView struct {
	ID               string `json:"subscriptionId"`
	Channel          string `json:"channel"`
	SentBytes        int64  `json:"sentBytes"`
	ConsumedBytes    int64  `json:"consumedBytes"`
	OutstandingBytes int64  `json:"outstandingBytes"`
	WindowBytes      int64  `json:"windowBytes"`
	Stalled          bool   `json:"stalled"`
	DroppedBytes     int64  `json:"droppedBytes"`
	Snapshots        int64  `json:"snapshots"`
	QueuedBytes      int64  `json:"queuedBytes"`
}

type viewerView struct {
	ID                   string             `json:"id"`
	Remote               string             `json:"remoteAddress"`
	Client               string             `json:"client"`
	ClientVersion        string             `json:"clientVersion,omitempty"`
	Role                 string             `json:"role"`
	Token                string             `json:"tokenId,omitempty"`
	TokenParent          string             `json:"tokenParentId,omitempty"`
	Opened               time.Time          `json:"opened"`
	Initialized          bool               `json:"initialized"`
	FramesIn             int64              `json:"framesIn"`
	BytesIn              int64              `json:"bytesIn"`
	MessagesOut          int64              `json:"messagesOut"`
	BytesOut             int64              `json:"bytesOut"`
	Resets               int64              `json:"resets"`
	DroppedNotifications int64              `json:"droppedNotifications"`
	Subscriptions        []subscriptionView `json:"subscriptions"`
}

func toViewerView(v *ahpv1.Viewer) viewerView {
	out := viewerView{
		ID: v.Id, Remote: v.RemoteAddress, Client: v.Client, ClientVersion: v.ClientVersion, Role: roleName(v.Role), Opened: v.OpenTime.AsTime(), Initialized: v.Initialized,
		FramesIn: v.FramesIn, BytesIn: v.BytesIn, MessagesOut: v.MessagesOut, BytesOut: v.BytesOut, Resets: v.Resets,
		DroppedNotifications: v.DroppedNotifications, Subscriptions: []subscriptionView{},
		Token: v.TokenId, TokenParent: v.TokenParentId,
	}
	for _, s := range v.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, subscriptionView{
			ID: s.Id, Channel: s.Channel, SentBytes: s.SentBytes, ConsumedBytes: s.ConsumedBytes, OutstandingBytes: s.OutstandingBytes,
			WindowBytes: s.WindowBytes, Stalled: s.Stalled, DroppedBytes: s.DroppedBytes, Snapshots: s.Snapshots, QueuedBytes: s.QueuedBytes,
		})
	}
	return out
}

type countersView struct {
	FramesIn             int64 `json:"framesIn"`
	BytesIn              int64 `json:"bytesIn"`
	MessagesOut          int64 `json:"messagesOut"`
	BytesOut             int64 `json:"bytesOut"`
	Resets               int64 `json:"resets"`
	DroppedNotifications int64 `json:"droppedNotifications"`
	Subscriptions        int64 `json:"subscriptions"`
	WireBytesOut         int64 `json:"wireBytesOut"`
	WireBytesIn          int64 `json:"wireBytesIn"`
}

// ratio is the wire/message ratio of output (compression), "-" if unknown.
func (c countersView) ratio() string {
	if c.BytesOut == 0 || c.WireBytesOut == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(c.WireBytesOut)/float64(c.BytesOut))
}

type connStatsView struct {
	Viewer string `json:"viewer"`
	countersView
}

type channelStatsView struct {
	Channel       string `json:"channel"`
	Type          string `json:"type"`
	Viewers       int64  `json:"viewers"`
	SentBytes     int64  `json:"sentBytes"`
	ConsumedBytes int64  `json:"consumedBytes"`
	DroppedBytes  int64  `json:"droppedBytes"`
	Snapshots     int64  `json:"snapshots"`
	Stalled       int64  `json:"stalled"`
}

type statsView struct {
	Totals      countersView       `json:"totals"`
	Connections []connStatsView    `json:"connections"`
	Channels    []channelStatsView `json:"channels"`
}

func toCountersView(c *ahpv1.ConnectionCounters) countersView {
	return countersView{c.GetFramesIn(), c.GetBytesIn(), c.GetMessagesOut(), c.GetBytesOut(), c.GetResets(), c.GetDroppedNotifications(), c.GetSubscriptions(), c.GetWireBytesOut(), c.GetWireBytesIn()}
}

func toStatsView(s *ahpv1.GetStatsResponse) statsView {
	v := statsView{Totals: toCountersView(s.Totals), Connections: []connStatsView{}, Channels: []channelStatsView{}}
	for _, c := range s.Connections {
		v.Connections = append(v.Connections, connStatsView{c.Viewer, toCountersView(c.Counters)})
	}
	for _, c := range s.Channels {
		v.Channels = append(v.Channels, channelStatsView{c.Channel, c.Type, c.Viewers, c.SentBytes, c.ConsumedBytes, c.DroppedBytes, c.Snapshots, c.Stalled})
	}
	return v
}

type eventView struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Channel string    `json:"channel,omitempty"`
	Viewer  string    `json:"viewer,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSONLine prints one compact JSON object per line (for streams).
func (a *app) printJSONLine(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table returns a tabwriter on stdout with the header written.
func (a *app) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

// printChannels prints the channels table; wide adds the ID, AGE, EXIT
// (code or signal), COMMAND (a terminal's) or DETAIL (a TCP channel's
// target and phase, a telemetry channel's source and samples). The
// telemetry and TCP channels' figures follow in tables of their own.
// Listing one type (typ, from --type) prints only that type's table:
// telemetry and TCP channels have no size or pid.
func (a *app) printChannels(views []channelView, wide bool, typ string) error {
	switch typ {
	case "tcp":
		return a.printTCPChannels(views, wide)
	case "telemetry":
		return a.printTelemetryChannels(views)
	}
	header := []string{"CHANNEL", "TYPE", "STATE", "VIEWERS", "SIZE", "PID", "TITLE"}
	if wide {
		header = []string{"CHANNEL", "ID", "TYPE", "STATE", "AGE", "VIEWERS", "SIZE", "PID", "EXIT", "COMMAND/DETAIL", "TITLE"}
	}
	tw := a.table(header...)
	for _, c := range views {
		size, pid := "-", "-"
		if c.Rows > 0 {
			size = fmt.Sprintf("%dx%d", c.Cols, c.Rows)
		}
		if c.Pid > 0 {
			pid = fmt.Sprint(c.Pid)
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", c.Channel, c.ID, c.Type, c.State, c.age(), c.Viewers, size, pid, c.Exit, c.detail(), c.Title)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", c.Channel, c.Type, c.State, c.Viewers, size, pid, c.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Telemetry and TCP channels' figures in tables of their own.
	var telemetry, tcp []channelView
	for _, c := range views {
		if c.Telemetry != nil {
			telemetry = append(telemetry, c)
		}
		if c.TCP != nil {
			tcp = append(tcp, c)
		}
	}
	if len(telemetry) > 0 {
		fmt.Fprintln(a.stdout)
		if err := a.printTelemetryChannels(telemetry); err != nil {
			return err
		}
	}
	if len(tcp) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	return a.printTCPChannels(tcp, false)
}

// printTelemetryChannels is the table of the telemetry channels of views.
func (a *app) printTelemetryChannels(views []channelView) error {
	tw := a.table("CHANNEL", "SOURCE", "POLICY", "VIEWERS", "SAMPLES", "NEXT SEQ", "STATUS")
	for _, c := range views {
		if t := c.Telemetry; t != nil {
			status := t.Status
			if status == "" {
				status = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", c.Channel, t.Source, t.Policy, c.Viewers, t.Samples, t.Seq, status)
		}
	}
	return tw.Flush()
}

// printTCPChannels is the table of the TCP channels of views: the target,
// the bytes each way and the state (phase), with the age when wide.
func (a *app) printTCPChannels(views []channelView, wide bool) error {
	header := []string{"CHANNEL", "TARGET", "REMOTE", "STATE", "CONSUMER", "BYTES IN", "BYTES OUT", "RESUMES"}
	if wide {
		header = append(header, "AGE")
	}
	tw := a.table(header...)
	n := 0
	for _, c := range views {
		t := c.TCP
		if t == nil {
			continue
		}
		n++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%d\t%d", c.Channel, t.Target, dash(t.Remote), t.Phase, t.Consumer, t.BytesIn, t.BytesOut, t.Resumes)
		if wide {
			fmt.Fprintf(tw, "\t%s", c.age())
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintln(a.stdout, "\nBYTES IN were written to the target, BYTES OUT read from it.")
	}
	return nil
}

func (a *app) printViewers(views []viewerView) error {
	tw := a.table("ID", "CLIENT", "ROLE", "TOKEN", "REMOTE", "AGE", "SUBS", "BYTES OUT", "BYTES IN", "RESETS")
	for _, v := range views {
		token := v.Token
		switch {
		case !v.Initialized:
			token = "-"
		case token == "":
			token = "admin"
		case v.TokenParent != "":
			token += " (from " + v.TokenParent + ")"
		}
		client := dash(v.Client)
		if v.ClientVersion != "" {
			client += " " + v.ClientVersion
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", v.ID, client, v.Role, token, v.Remote,
			time.Since(v.Opened).Round(time.Second), len(v.Subscriptions), v.BytesOut, v.BytesIn, v.Resets)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var subs [][2]any
	for _, v := range views {
		for _, s := range v.Subscriptions {
			subs = append(subs, [2]any{v.ID, s})
		}
	}
	if len(subs) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	tw = a.table("VIEWER", "SUB", "CHANNEL", "OUTSTANDING", "WINDOW", "STALLED", "DROPPED", "SNAPSHOTS", "QUEUED")
	for _, vs := range subs {
		s := vs[1].(subscriptionView)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%d\t%d\t%d\n", vs[0], s.ID, s.Channel, s.OutstandingBytes, s.WindowBytes, s.Stalled, s.DroppedBytes, s.Snapshots, s.QueuedBytes)
	}
	return tw.Flush()
}

func (a *app) printStats(v statsView) error {
	tw := a.table("VIEWER", "FRAMES IN", "BYTES IN", "MESSAGES OUT", "BYTES OUT", "WIRE OUT", "RATIO", "RESETS", "DROPPED", "SUBS")
	row := func(name string, c countersView) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", name, c.FramesIn, c.BytesIn, c.MessagesOut, c.BytesOut, c.WireBytesOut, c.ratio(), c.Resets, c.DroppedNotifications, c.Subscriptions)
	}
	for _, c := range v.Connections {
		row(c.Viewer, c.countersView)
	}
	row("total", v.Totals)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	tw = a.table("CHANNEL", "TYPE", "VIEWERS", "SENT", "CONSUMED", "DROPPED", "SNAPSHOTS", "STALLED")
	for _, c := range v.Channels {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Channel, c.Type, c.Viewers, c.SentBytes, c.ConsumedBytes, c.DroppedBytes, c.Snapshots, c.Stalled)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\nCounters cover open connections; SENT/CONSUMED are UTF-16 bytes of live subscriptions.")
	return nil
}

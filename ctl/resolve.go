package ctl

import (
	"context"
	"fmt"
	"strings"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// Short channel names: wherever a command takes a channel URI, a bare ID
// ("shell") stands for the one channel of any type with that ID
// (ahp-terminal:/shell). Anything with a ':' is taken as a URI as it is.

// isShortName reports whether s is a bare channel ID rather than a URI.
func isShortName(s string) bool { return s != "" && !strings.Contains(s, ":") }

// channelURI resolves s to a channel URI: a URI as is, a short name through
// ListChannels.
func (a *app) channelURI(ctx context.Context, s string) (string, error) {
	return a.channelURIOf(ctx, s, "")
}

// channelURIOf is channelURI for a command that takes channels of one
// type (terminal, telemetry, tcp; "" any): a short name names the channel
// of that type with the ID, and a missing one is reported with that
// type's URI.
func (a *app) channelURIOf(ctx context.Context, s, typ string) (string, error) {
	if !isShortName(s) {
		return s, nil
	}
	c, rctx, cancel, err := a.connect(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	res, err := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{})
	if err != nil {
		return "", err
	}
	return matchShortNameOf(s, typ, res.Channels)
}

// matchShortName picks the channel whose ID is name: none is an error (exit
// 1, like a URI the daemon does not know), several a usage error naming
// them (exit 2: the user must say which).
func matchShortName(name string, chans []*ahpv1.Channel) (string, error) {
	return matchShortNameOf(name, "", chans)
}

// matchShortNameOf is matchShortName among the channels of type typ (""
// any type).
func matchShortNameOf(name, typ string, chans []*ahpv1.Channel) (string, error) {
	prefix := "ahp-" + typ + ":/"
	var hits []string
	for _, ch := range chans {
		if ch.Id == name && (typ == "" || strings.HasPrefix(ch.Uri, prefix)) {
			hits = append(hits, ch.Uri)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		if typ != "" {
			return "", fmt.Errorf("no %s channel has the ID %q (see ahpctl ls --type %s; a full URI is %s%s)", typ, name, typ, prefix, name)
		}
		return "", fmt.Errorf("no channel has the ID %q (see ahpctl ls; a full URI names the type: ahp-terminal:/%s, ahp-telemetry:/%s or ahp-tcp:/%s)", name, name, name, name)
	}
	return "", usagef("%q is ambiguous: %s (give the full URI)", name, strings.Join(hits, ", "))
}

// channelURIs resolves each of list (see channelURI), with one ListChannels
// for all the short names.
func (a *app) channelURIs(ctx context.Context, list []string) ([]string, error) {
	short := false
	for _, s := range list {
		short = short || isShortName(s)
	}
	if !short {
		return list, nil
	}
	c, rctx, cancel, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := c.channels.ListChannels(rctx, &ahpv1.ListChannelsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, s := range list {
		if !isShortName(s) {
			out[i] = s
			continue
		}
		if out[i], err = matchShortName(s, res.Channels); err != nil {
			return nil, err
		}
	}
	return out, nil
}

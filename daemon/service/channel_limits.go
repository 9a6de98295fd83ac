package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
)

// Per-channel limit overrides: a channel may have its own flow-control
// defaults and maximums and host receive limits (the limits of §3 that
// belong to a subscription). Limits of a connection (maxBufferedBytes,
// heartbeat, …) cannot differ per channel.

// channelLimitField reports whether a limit may be overridden per channel.
func channelLimitField(name string) bool {
	group, _, _ := strings.Cut(name, ".")
	return slices.Contains(config.ReceiveGroups, group)
}

// LimitsFor returns the limits that apply to a new subscription of
// channel: the daemon's, with the channel's overrides.
func (s *Service) LimitsFor(channel string) config.Limits {
	l := s.Limits()
	s.mu.Lock()
	o, ok := s.chLimits[channel]
	s.mu.Unlock()
	if ok {
		for _, f := range o.fields {
			v, _ := o.values.LimitValue(f)
			l.SetLimitValue(f, v)
		}
	}
	return l
}

// ChannelOverrides returns the names of the limits channel overrides.
func (s *Service) ChannelOverrides(ctx context.Context, channel string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.chLimits[channel].fields)
}

type channelLimits struct {
	fields []string      // overridden limit names, sorted
	values config.Limits // their values (other fields unused)
}

// UpdateChannelLimits sets (or, with clear, removes) overrides of channel
// for fields, taking values from from. Only per-subscription limits may be
// overridden; the result, combined with the daemon's limits, must
// validate. It returns the channel's effective limits and the fields that
// changed. A change applies to new subscriptions of the channel.
func (s *Service) UpdateChannelLimits(ctx context.Context, channel string, fields []string, from config.Limits, clear bool) (config.Limits, []string, error) {
	if _, ok := s.registry.Get(channel); !ok {
		return config.Limits{}, nil, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, channel)
	}
	limitsMu.Lock()
	defer limitsMu.Unlock()
	var names []string
	for _, name := range fields {
		expanded := []string{name}
		if slices.Contains(config.ReceiveGroups, name) {
			expanded = []string{name + ".windowBytes", name + ".maximumFrameBytes", name + ".maximumMessageBytes"}
		}
		for _, n := range expanded {
			if _, ok := from.LimitValue(n); !ok {
				return config.Limits{}, nil, argErr(name, "unknown limit")
			}
			if !channelLimitField(n) {
				return config.Limits{}, nil, argErr(name, "applies to a whole connection and cannot be set per channel")
			}
			names = append(names, n)
		}
	}
	before := s.LimitsFor(channel)
	s.mu.Lock()
	cur := s.chLimits[channel]
	next := channelLimits{fields: slices.Clone(cur.fields), values: cur.values}
	s.mu.Unlock()
	for _, n := range names {
		if clear {
			next.fields = slices.DeleteFunc(next.fields, func(f string) bool { return f == n })
			continue
		}
		v, _ := from.LimitValue(n)
		next.values.SetLimitValue(n, v)
		if !slices.Contains(next.fields, n) {
			next.fields = append(next.fields, n)
		}
	}
	slices.Sort(next.fields)
	eff := s.Limits()
	for _, f := range next.fields {
		v, _ := next.values.LimitValue(f)
		eff.SetLimitValue(f, v)
	}
	if err := eff.Validate(); err != nil {
		return before, nil, limitArgError(err)
	}
	s.mu.Lock()
	if s.chLimits == nil {
		s.chLimits = map[string]channelLimits{}
	}
	if len(next.fields) == 0 {
		delete(s.chLimits, channel)
	} else {
		s.chLimits[channel] = next
	}
	s.mu.Unlock()
	changed := config.ChangedLimits(before, eff)
	s.events.Publish(events.Event{Kind: "limits.changed", Channel: channel, Detail: strings.Join(changed, ",")})
	return eff, changed, nil
}

package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ahp-dev/ahpd/daemon/config"
)

// limitsMu serializes UpdateLimits' read-modify-write of the limits.
var limitsMu sync.Mutex

// UpdateLimits copies the limits named in fields from `from` into the
// limits in force, validates the result and installs it; with no fields it
// installs `from` whole. A name is a LimitFields name or a ReceiveLimits
// group (all three members). Zero values take their defaults. It returns
// the limits now in force and the names of the limits that changed; on an
// invalid name or value it changes nothing and returns an *ArgError naming
// the field.
func (s *Service) UpdateLimits(ctx context.Context, fields []string, from config.Limits) (config.Limits, []string, error) {
	limitsMu.Lock()
	defer limitsMu.Unlock()
	cur := s.Limits()
	next := from
	if len(fields) > 0 {
		next = cur
		for _, name := range fields {
			names := []string{name}
			for _, g := range config.ReceiveGroups {
				if name == g {
					names = []string{g + ".windowBytes", g + ".maximumFrameBytes", g + ".maximumMessageBytes"}
				}
			}
			for _, n := range names {
				v, ok := from.LimitValue(n)
				if !ok {
					return cur, nil, argErr(name, "unknown limit")
				}
				next.SetLimitValue(n, v)
			}
		}
	}
	if err := next.WithDefaults().Validate(); err != nil {
		return cur, nil, limitArgError(err)
	}
	if err := s.SetLimits(next); err != nil {
		return cur, nil, limitArgError(err)
	}
	now := s.Limits()
	return now, config.ChangedLimits(cur, now), nil
}

// limitArgError turns an error of Limits.Validate ("limits: FIELD: reason")
// into an *ArgError naming the field. (If Validate returned an *ArgError
// itself, this parsing could go.)
func limitArgError(err error) error {
	var ae *ArgError
	if errors.As(err, &ae) {
		return ae
	}
	msg := strings.TrimPrefix(err.Error(), "limits: ")
	if field, reason, ok := strings.Cut(msg, ": "); ok && !strings.ContainsRune(field, ' ') {
		return &ArgError{Field: field, Reason: reason}
	}
	return fmt.Errorf("limits: %w", err)
}

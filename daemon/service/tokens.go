package service

import (
	"context"
	"fmt"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/registry"
)

// TokenRequest describes a credential for CreateToken.
type TokenRequest struct {
	// Channels the token reaches (URIs, need not exist yet); empty: all.
	Channels []string
	Role     auth.Role
	// TTL is the lifetime; 0 means 24 h for a token and the ticket TTL for
	// a single-use ticket.
	TTL       time.Duration
	SingleUse bool
}

// CreateToken validates r and mints a token. The secret is returned once;
// the store keeps only its digest.
func (s *Service) CreateToken(ctx context.Context, r TokenRequest) (secret string, info auth.TokenInfo, err error) {
	if len(r.Channels) > maxTokenChannels {
		return "", auth.TokenInfo{}, argErr("channels", "at most %d channels, got %d", maxTokenChannels, len(r.Channels))
	}
	for i, uri := range r.Channels {
		if err := registry.ValidURI(uri); err != nil {
			return "", auth.TokenInfo{}, argErr(fmt.Sprintf("channels[%d]", i), "%v", err)
		}
	}
	if r.Role != auth.RoleView && r.Role != auth.RoleControl {
		return "", auth.TokenInfo{}, argErr("role", "must be view or control")
	}
	switch {
	case r.TTL < 0 || r.TTL > maxTokenTTL:
		return "", auth.TokenInfo{}, argErr("ttl", "must be between 0 and %v, got %v", maxTokenTTL, r.TTL)
	case r.TTL == 0 && r.SingleUse:
		r.TTL = s.cfg.TicketTTL
	case r.TTL == 0:
		r.TTL = defaultTokenTTL
	}
	if n := len(s.tokens.List()); n >= maxLiveTokens {
		return "", auth.TokenInfo{}, fmt.Errorf("%w: %d live tokens (the maximum); revoke some or let them expire", ErrTooMany, n)
	}
	g := auth.Grant{Channels: r.Channels, Role: r.Role, SingleUse: r.SingleUse, Expires: s.now().Add(r.TTL)}
	secret, id := s.tokens.Mint(g)
	s.log.Info("token created", "token", id, "role", r.Role.String(), "channels", len(r.Channels), "singleUse", r.SingleUse, "ttl", r.TTL)
	return secret, auth.TokenInfo{ID: id, Grant: g}, nil
}

// ListTokens lists the live tokens, without secrets, ordered by id.
func (s *Service) ListTokens(ctx context.Context) []auth.TokenInfo { return s.tokens.List() }

// RevokeToken removes the token with id and the tokens derived from it
// (a ticket's reconnect tokens, also after the ticket expired), and closes
// the connections that use them with 1008 "token revoked".
func (s *Service) RevokeToken(ctx context.Context, id string) error {
	ids := s.tokens.RevokeAll(id)
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s", ErrTokenNotFound, id)
	}
	s.viewers.RecheckTokens()
	s.log.Info("token revoked", "token", id, "revoked", ids)
	return nil
}

// BrowserLink returns the web page URL (base is http://HOST:PORT) that
// opens the existing channel uri with a fresh single-use ticket, and when
// the ticket expires.
func (s *Service) BrowserLink(ctx context.Context, base, uri string, role auth.Role) (string, time.Time, error) {
	if _, ok := s.registry.Get(uri); !ok {
		return "", time.Time{}, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	expires := s.now().Add(s.cfg.TicketTTL)
	return s.BrowserURL(base, uri, role), expires, nil
}

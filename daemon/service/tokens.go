package service

import (
	"context"
	"fmt"
	"strings"
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

// ListTokens lists the live tokens, without secrets, in creation order.
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

// LinkRequest describes a browser link for BrowserLink.
type LinkRequest struct {
	Channel string // the channel the page opens; "": every channel, none opened
	// AllChannels makes the link reach every channel even when it opens
	// Channel (the operator's startup link).
	AllChannels bool
	Role        auth.Role
	Reusable    bool          // a token (share link) instead of a single-use ticket
	TTL         time.Duration // of a reusable link; 0: defaultLinkTTL
}

// defaultLinkTTL is how long a reusable link works unless asked.
const defaultLinkTTL = time.Hour

// Link is a browser link and its credential.
type Link struct {
	URL     string
	Expires time.Time
	TokenID string
}

// BrowserLink returns the web page URL (base is http://HOST:PORT) that
// opens the existing channel r.Channel (or reaches every channel, when
// empty) with a fresh single-use ticket, or with a reusable token that
// works in any number of tabs until it expires or is revoked.
func (s *Service) BrowserLink(ctx context.Context, base string, r LinkRequest) (Link, error) {
	var scope []string
	if r.Channel != "" {
		if _, ok := s.registry.Get(r.Channel); !ok {
			return Link{}, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, r.Channel)
		}
		if !r.AllChannels {
			scope = []string{r.Channel}
		}
	}
	kind, ttl := "ticket", s.cfg.TicketTTL
	var secret string
	var info auth.TokenInfo
	if r.Reusable {
		if r.TTL == 0 {
			r.TTL = defaultLinkTTL
		}
		var err error
		if secret, info, err = s.CreateToken(ctx, TokenRequest{Channels: scope, Role: r.Role, TTL: r.TTL}); err != nil {
			return Link{}, err
		}
		kind = "token"
	} else {
		if r.TTL != 0 {
			return Link{}, argErr("ttl", "a single-use link has the daemon's ticketTTL (%v); a ttl needs a reusable link", s.cfg.TicketTTL)
		}
		g := auth.Grant{Channels: scope, Role: r.Role, SingleUse: true, Expires: s.now().Add(ttl)}
		secret, info.ID = s.tokens.Mint(g)
		info.Grant = g
	}
	// Secrets are base64url and channel URIs use only letters, digits,
	// "-_.:/": nothing needs escaping in a fragment.
	u := strings.TrimSuffix(base, "/") + "/#" + kind + "=" + secret
	if r.Channel != "" {
		u += "&channel=" + r.Channel
	}
	return Link{URL: u, Expires: info.Grant.Expires, TokenID: info.ID}, nil
}

// Package registry holds the daemon's channels under their URIs: each is a
// channel kind's flow.Channel with the daemon's bookkeeping (label, viewer
// count, closed flag). Nothing in it depends on a channel's kind. A
// Registry and its Channels are safe for concurrent use.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// Channel URI schemes (PROTOCOL.md §8).
const (
	SchemeTerminal  = "ahp-terminal:/"
	SchemeTelemetry = "ahp-telemetry:/"
	SchemeTCP       = "ahp-tcp:/"
)

// Scheme returns the URI scheme of a channel type, or "" for an unknown
// type.
func Scheme(typ string) string {
	switch typ {
	case "terminal":
		return SchemeTerminal
	case "telemetry":
		return SchemeTelemetry
	case "tcp":
		return SchemeTCP
	}
	return ""
}

// Channel is a resource the host owns: a channel kind's flow.Channel
// under its URI. Nothing here depends on the kind.
type Channel struct {
	URI     string
	ID      string
	Type    string // terminal | telemetry | tcp
	Label   string // title given at creation
	Created time.Time
	// Spec is what the channel was made from, for whoever made it (the
	// service keeps a terminal's spec to restart it); the registry does
	// not look at it.
	Spec any
	// Owner is the id of the token whose connection created the channel
	// ("" for the admin token and the control plane): its TCP channels
	// count against that token's limits, at an upgrade in place too.
	Owner string

	impl flow.Channel

	viewers atomic.Int64
	closed  atomic.Bool
}

// NewChannel wraps a kind's channel; Registry.Add names it.
func NewChannel(label string, impl flow.Channel) *Channel {
	return &Channel{Type: impl.Kind(), Label: label, Created: time.Now(), impl: impl}
}

// Impl is the kind's channel.
func (c *Channel) Impl() flow.Channel { return c.impl }

// Joined counts a new subscription; Left one that ended.
func (c *Channel) Joined() { c.viewers.Add(1) }

// Left counts a subscription that ended.
func (c *Channel) Left() { c.viewers.Add(-1) }

// MarkClosed records that the operator closed the channel: State is
// closed from now on, and subscriptions are reset.
func (c *Channel) MarkClosed() { c.closed.Store(true) }

// Closed reports whether MarkClosed was called.
func (c *Channel) Closed() bool { return c.closed.Load() }

// State is running, exited or closed (PROTOCOL.md §2).
func (c *Channel) State() string {
	if c.closed.Load() {
		return string(flow.StateClosed)
	}
	return string(c.impl.State())
}

// Viewers returns the live subscriptions.
func (c *Channel) Viewers() int64 { return c.viewers.Load() }

// ChannelInfo is one entry of channels/list.
type ChannelInfo struct {
	Channel string `json:"channel"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	State   string `json:"state"`
	Viewers int64  `json:"viewers"`
	// Exit is how the channel's process ended, as terminal/exit says it
	// ({code} or {signal}); absent while it runs and for kinds without a
	// process.
	Exit *ExitInfo `json:"exit,omitempty"`
}

// ExitInfo is ChannelInfo's exit.
type ExitInfo struct {
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// Info describes the channel for channels/list.
func (c *Channel) Info() ChannelInfo {
	d := c.impl.Describe()
	title := d.Title
	if title == "" {
		title = c.Label
	}
	info := ChannelInfo{Channel: c.URI, Type: c.Type, Title: title, State: c.State(), Viewers: c.Viewers()}
	if e := d.Exit; e != nil {
		info.Exit = &ExitInfo{Signal: e.Signal}
		if e.Signal == "" {
			code := e.Code
			info.Exit.Code = &code
		}
	}
	return info
}

// Errors of the registry.
var (
	ErrChannelExists   = errors.New("channel already exists")
	ErrChannelNotFound = errors.New("channel not found")
	ErrBadChannelID    = errors.New("invalid channel id")
)

// Registry holds the daemon's channels.
type Registry struct {
	mu     sync.Mutex // guards byURI, order and next
	byURI  map[string]*Channel
	order  []*Channel
	nextID int
}

// New returns an empty Registry.
func New() *Registry { return &Registry{byURI: map[string]*Channel{}} }

// ValidID allows ids a URI path segment can carry unescaped.
func ValidID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: %q: must be 1 to 128 characters", ErrBadChannelID, id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.", r)) {
			return fmt.Errorf("%w: %q: use letters, digits, '-', '_' and '.'", ErrBadChannelID, id)
		}
	}
	return nil
}

// Add registers ch under the scheme and an id, given or generated.
func (r *Registry) Add(scheme, id string, ch *Channel) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == "" {
		for {
			r.nextID++
			id = fmt.Sprint(r.nextID)
			if r.byURI[scheme+id] == nil {
				break
			}
		}
	} else if err := ValidID(id); err != nil {
		return err
	}
	uri := scheme + id
	if r.byURI[uri] != nil {
		return fmt.Errorf("%w: %s", ErrChannelExists, uri)
	}
	ch.URI, ch.ID = uri, id
	r.byURI[uri] = ch
	r.order = append(r.order, ch)
	return nil
}

// NextID returns a free numbered id under scheme, as Add with an empty id
// would pick, for a channel that must know its id before it is added (a
// terminal names its recordings after it). Add may still find it taken
// by a channel added meanwhile under that id explicitly.
func (r *Registry) NextID(scheme string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		r.nextID++
		id := fmt.Sprint(r.nextID)
		if r.byURI[scheme+id] == nil {
			return id
		}
	}
}

// Get returns the channel with uri.
func (r *Registry) Get(uri string) (*Channel, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.byURI[uri]
	return ch, ok
}

// List returns the channels in creation order.
func (r *Registry) List() []*Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// Remove drops a channel from the registry.
func (r *Registry) Remove(uri string) (*Channel, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.byURI[uri]
	if !ok {
		return nil, false
	}
	delete(r.byURI, uri)
	r.order = slices.DeleteFunc(r.order, func(c *Channel) bool { return c == ch })
	return ch, true
}

// ValidURI checks that uri is a well-formed channel URI.
func ValidURI(uri string) error {
	for _, scheme := range []string{SchemeTerminal, SchemeTelemetry, SchemeTCP} {
		if id, ok := strings.CutPrefix(uri, scheme); ok {
			return ValidID(id)
		}
	}
	return fmt.Errorf("%q is not a channel URI (ahp-terminal:/ID, ahp-telemetry:/ID or ahp-tcp:/ID)", uri)
}

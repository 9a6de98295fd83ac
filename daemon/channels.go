package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ahp-dev/ahpd/flow"
)

// Channel URI schemes (PROTOCOL.md §8).
const (
	schemeTerminal  = "ahp-terminal:/"
	schemeTelemetry = "ahp-telemetry:/"
	schemeTCP       = "ahp-tcp:/"
)

// schemes maps channel types to their URI schemes.
var schemes = map[string]string{"terminal": schemeTerminal, "telemetry": schemeTelemetry, "tcp": schemeTCP}

// Channel is a resource the host owns: a channel kind's flow.Channel
// under its URI. Nothing here depends on the kind.
type Channel struct {
	URI   string
	ID    string
	Type  string // terminal | telemetry | tcp
	Label string // title given at creation

	impl flow.Channel

	viewers atomic.Int64
	closed  atomic.Bool
}

// Impl is the kind's channel.
func (c *Channel) Impl() flow.Channel { return c.impl }

// State is running, exited or closed (PROTOCOL.md §2).
func (c *Channel) State() string {
	if c.closed.Load() {
		return string(flow.StateClosed)
	}
	return string(c.impl.State())
}

// Title is the channel's own title, else the label.
func (c *Channel) Title() string {
	if t := c.impl.Describe().Title; t != "" {
		return t
	}
	return c.Label
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
}

func (c *Channel) info() ChannelInfo {
	return ChannelInfo{Channel: c.URI, Type: c.Type, Title: c.Title(), State: c.State(), Viewers: c.Viewers()}
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

func newRegistry() *Registry { return &Registry{byURI: map[string]*Channel{}} }

// validChannelID allows ids a URI path segment can carry unescaped.
func validChannelID(id string) error {
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

// add registers ch under the scheme and an id, given or generated.
func (r *Registry) add(scheme, id string, ch *Channel) error {
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
	} else if err := validChannelID(id); err != nil {
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

// remove drops a channel from the registry.
func (r *Registry) remove(uri string) (*Channel, bool) {
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

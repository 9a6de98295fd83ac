package daemon

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
	schemeTerminal  = "ahp-terminal:/"
	schemeTelemetry = "ahp-telemetry:/"
	schemeTCP       = "ahp-tcp:/"
)

// Viewer is one subscription's view of a channel: the Source the
// connection pulls from, closed when the subscription ends.
type Viewer interface {
	flow.Source
	Close()
}

// Terminal is what the daemon needs of a terminal channel (package pty).
type Terminal interface {
	// Attach adds a viewer whose first messages are a snapshot; wake is
	// called (non-blocking) when it has something new to pull. window is
	// the viewer's flow-control window: it may fall behind by that much
	// plus the terminal's backlog before it is resnapshotted (§8).
	Attach(wake func(), window int64) Viewer
	// Input queues data for the PTY and calls done once it is written.
	Input(data []byte, done func()) error
	// Resize changes the PTY size.
	Resize(rows, cols int) error
	// Running reports whether the process has not exited yet.
	Running() bool
	// Title is the window title the program set, if any.
	Title() string
	// Paced is how long the terminal's output has been paced so that
	// typing into another terminal went first (pty.Pacer).
	Paced() time.Duration
	// Close hangs up the process and releases the PTY.
	Close() error
}

// Channel is a resource the host owns.
type Channel struct {
	URI   string
	ID    string
	Type  string // terminal | telemetry | tcp
	Label string // title given at creation

	term Terminal

	viewers atomic.Int64
	closed  atomic.Bool
}

// State is running, exited or closed (PROTOCOL.md §2).
func (c *Channel) State() string {
	switch {
	case c.closed.Load():
		return "closed"
	case c.term != nil && !c.term.Running():
		return "exited"
	}
	return "running"
}

// Title is the program's title, else the label.
func (c *Channel) Title() string {
	if c.term != nil {
		if t := c.term.Title(); t != "" {
			return t
		}
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

// reserve allocates an id (given or generated) for a new channel of the
// scheme and registers ch under it.
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

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/internal/handover"
	"github.com/ahp-dev/ahpd/tcp"
)

// TCP channels at an upgrade in place (docs/upgrade.md): each is frozen
// (tcp.Channel.Freeze) into a section "tcp/N" with its socket's descriptor
// kept across the execve, and adopted by the new binary under its URI,
// counted against the token that created it, its journal in that token's
// budget. Its client (ahpctl forward, or any client holding a resume
// token) resumes it as after any reconnect (PROTOCOL.md §8).

// handedTCP is one TCP channel of the "channels" section; its state is the
// section "tcp/N".
type handedTCP struct {
	ID      string          `json:"id"`
	Created time.Time       `json:"created"`
	Params  json.RawMessage `json:"params"`          // what it was created from (tcp.ParseCreate)
	Owner   string          `json:"owner,omitempty"` // the id of the token that created it
	FD      int             `json:"fd"`              // the socket's descriptor
}

// handOverTCP freezes tc into w and list and returns its socket, or logs
// why it could not and closes it (nil).
func (s *Server) handOverTCP(w *handover.Writer, ch *registry.Channel, tc *tcp.Channel, list *handedChannels) *os.File {
	fr, err := tc.Freeze()
	if err == nil {
		err = w.Section("tcp/"+strconv.Itoa(len(list.TCP)), fr.State)
		if err != nil {
			fr.Conn.Close()
		}
	}
	if err != nil {
		s.log.Error("upgrade: TCP channel not handed over; closing it", "channel", ch.URI, "err", err)
		_ = tc.Close()
		return nil
	}
	params, _ := ch.Spec.(json.RawMessage)
	list.TCPVersion = tcp.HandoverVersion()
	list.TCP = append(list.TCP, handedTCP{ID: ch.ID, Created: ch.Created, Params: params, Owner: ch.Owner, FD: int(fr.Conn.Fd())})
	return fr.Conn
}

// checkTCPVersion refuses TCP channel states this binary cannot read.
func checkTCPVersion(list handedChannels) error {
	// A state without TCP channels (version 1 of the section) has none.
	if (len(list.TCP) > 0 || list.TCPVersion != 0) && list.TCPVersion != tcp.HandoverVersion() {
		return fmt.Errorf("upgrade: TCP channel state version %d, this ahpd reads version %d", list.TCPVersion, tcp.HandoverVersion())
	}
	return nil
}

// checkTCP checks each TCP channel's state and params (CheckState).
func checkTCP(st *handover.State, list handedChannels) error {
	for i, ht := range list.TCP {
		state, ok := st.Section("tcp/" + strconv.Itoa(i))
		if !ok {
			return fmt.Errorf("upgrade: tcp %s: no state section", ht.ID)
		}
		if err := tcp.CheckState(state); err != nil {
			return fmt.Errorf("upgrade: tcp %s: %w", ht.ID, err)
		}
		if _, _, err := tcp.ParseCreate(ht.Params); err != nil {
			return fmt.Errorf("upgrade: tcp %s: %w", ht.ID, err)
		}
		if ht.FD < 3 {
			return fmt.Errorf("upgrade: tcp %s: descriptor %d", ht.ID, ht.FD)
		}
	}
	return nil
}

// adoptTCP adopts the TCP channels of list (AdoptChannels); a channel
// whose state or socket is refused is closed.
func (s *Server) adoptTCP(st *handover.State, list handedChannels) (int, error) {
	var errs []error
	n := 0
	for i, ht := range list.TCP {
		state, _ := st.Section("tcp/" + strconv.Itoa(i))
		err := s.adoptOneTCP(ht, state)
		if err != nil {
			errs = append(errs, fmt.Errorf("tcp %s: %w", ht.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (s *Server) adoptOneTCP(ht handedTCP, state []byte) error {
	if ht.FD < 3 {
		return fmt.Errorf("descriptor %d", ht.FD)
	}
	conn := os.NewFile(uintptr(ht.FD), "tcp-channel")
	host, port, err := tcp.ParseCreate(ht.Params)
	if err != nil {
		conn.Close()
		return err
	}
	c, err := tcp.Adopt(tcpConfig(s.Service, host, port, s.sess.BudgetOf(ht.Owner), s.log), conn, state)
	if err != nil {
		return err
	}
	_, err = s.AdoptTCP(ht.ID, ht.Owner, ht.Params, c, ht.Created)
	return err
}

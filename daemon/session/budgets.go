package session

import (
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/flow"
)

// Memory per credential. Every connection's started messages, what kinds
// queue for its subscribers (telemetry batches), its subscriptions' own
// state and the journals of the TCP channels it created count in the
// budget of the token it authenticated with, which counts in the daemon's
// total (maxTotalBufferedBytes): one token — however weak, a view
// token's — spends at most maxBufferedBytesPerToken, and the rest of the
// total stays for the others. The admin token counts in the total alone,
// and is admitted even when the total is spent (docs/security.md).

// subscriptionCost is what a subscription counts in its connection's
// queue budget (and so its token's and the daemon's) while it exists: its
// state on the host — the session's subscription, the Sender's stream
// with its fragmenter and window, the kind's subscriber (a terminal
// viewer's cursor, a telemetry viewer's queue head). A heap profile of
// the view-token attack (TestMemoryBudgetUnderAttack) put what subscribe
// allocates, start included, at about 27 MB for the 32,768 subscriptions
// the token's budget admitted, under 1 KiB each; the charge leaves room
// for the collector's headroom and a kind's first allocations. A subscribe that finds no room for it is refused with
// -32004, so a thousand subscriptions on each of dozens of connections
// count before they are allocated.
const subscriptionCost = 4 << 10

// tokenBudget is one token's budget and the connections using it.
type tokenBudget struct {
	b    *flow.Budget
	refs int
}

// budgetFor returns the budget a connection with grant g counts in, and
// holds it for the connection (releaseBudget gives it back): the admin
// token's is the daemon's total.
func (s *Server) budgetFor(g auth.Grant) *flow.Budget {
	if g.Admin || g.ID == "" {
		return s.budget
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tb := s.tokenBudgetLocked(g.ID)
	tb.refs++
	return tb.b
}

// BudgetOf returns the budget of the token whose id is id ("": the
// daemon's total), without holding it for a connection: a TCP channel
// adopted at an upgrade in place counts its journal in its creator's
// budget again.
func (s *Server) BudgetOf(id string) *flow.Budget {
	if id == "" {
		return s.budget
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenBudgetLocked(id).b
}

func (s *Server) tokenBudgetLocked(id string) *tokenBudget {
	tb := s.tokenBudgets[id]
	if tb == nil {
		s.gcBudgetsLocked()
		tb = &tokenBudget{b: s.budget.Child(s.cfg.PerTokenBufferedBytes())}
		s.tokenBudgets[id] = tb
	}
	return tb
}

// releaseBudget ends a budgetFor of g.
func (s *Server) releaseBudget(g auth.Grant) {
	if g.Admin || g.ID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tb := s.tokenBudgets[g.ID]; tb != nil {
		tb.refs--
	}
}

// gcBudgetsLocked forgets the budgets nobody uses: no connection, and
// nothing counted (a TCP channel a token created keeps its journal
// counted in the token's budget after the token's connections ended). It
// runs when a budget is added, once the map has grown past twice what it
// kept last time, so adding is O(1) amortised.
func (s *Server) gcBudgetsLocked() {
	if len(s.tokenBudgets) < 2*s.budgetsKept+16 {
		return
	}
	for id, tb := range s.tokenBudgets {
		if tb.refs == 0 && tb.b.Used() == 0 {
			delete(s.tokenBudgets, id)
		}
	}
	s.budgetsKept = len(s.tokenBudgets)
}

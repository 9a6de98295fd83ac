package telemetry

// QueueLen returns the viewer's queue length in entries and batches.
func (s *Sub) QueueLen() (entries, batches int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.q.Len(), s.qBatches
}

// PublishWork returns what Publish did for the viewers so far: queue
// entries it visited and samples it encoded (see publishWork).
func (c *Channel) PublishWork() (visited, encoded int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.work.visited, c.work.encoded
}

// Coalesced returns the samples (one per series) the viewer's queued
// coalesced batches hold, and whether it is behind (a span to coalesce
// when Pull reaches it).
func (s *Sub) Coalesced() (series int64, behind bool) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.kept, s.behind
}

// PinnedBytes returns the bytes of batch texts the series index keeps for
// its newest samples, and their bound.
func (c *Channel) PinnedBytes() (pinned, bound int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index.pinned, maxPinned
}

// HeldOf returns the bytes of a command's output a state carries, read
// and not yet parsed (nil: none, or no command's child).
func HeldOf(state []byte) []byte {
	r, err := decodeState(state)
	if err != nil || r.child == nil {
		return nil
	}
	return r.child.held
}

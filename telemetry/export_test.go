package telemetry

// QueueLen returns the viewer's queue length in entries and batches.
func (s *Sub) QueueLen() (entries, batches int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.q.Len(), s.qBatches
}

package pty

// The terminal's size with several viewers (PROTOCOL.md §8, terminal/resize;
// docs/protocol-decisions.md, "Terminal size with several viewers"), in the
// spirit of tmux's window-size latest:
//
//   - Each control viewer tells the size it wants with terminal/resize. The
//     first request of a subscription reports its size ("I am this big");
//     every later one is the user resizing its window, an explicit action.
//   - A control viewer is active when it types (terminal/input) or resizes
//     (a request after its first). The size of the most recently active
//     viewer that has told its size decides; so a second, smaller viewer
//     connecting changes nothing for the others: it is clipped until it
//     types or resizes.
//   - A report decides when no viewer does yet (the first viewer of a
//     terminal, or the first after the deciding one left with no other
//     active): then that viewer counts as active.
//   - When the deciding viewer leaves, the next most recently active one
//     that told its size decides; with none, the size stays.
//   - A view-only viewer never resizes: its request is refused (-32003) and
//     it takes no part in the choice.
//
// Terminal.Resize (ahpctl terminal resize) sets the size outside this
// policy; it holds until a viewer's request or a change of the deciding
// viewer sets another.

// requestSize handles a control viewer's terminal/resize request.
func (v *Viewer) requestSize(rows, cols int) error {
	if err := checkSize(rows, cols); err != nil {
		return err
	}
	t := v.t
	t.resizeMu.Lock()
	defer t.resizeMu.Unlock()
	if v.sizeGone {
		return nil
	}
	report := !v.sized
	v.sized, v.wantRows, v.wantCols = true, rows, cols
	t.sizers[v] = struct{}{}
	if !report || t.deciderLocked() == nil {
		t.activeLocked(v)
	}
	return t.applyDeciderLocked()
}

// active marks a control viewer active (it typed): if another viewer
// decided the size until now, this one's size applies. The deciding
// viewer typing costs an atomic load.
func (v *Viewer) active() {
	t := v.t
	if t.latest.Load() == v {
		return
	}
	t.resizeMu.Lock()
	defer t.resizeMu.Unlock()
	if v.sizeGone {
		return
	}
	t.sizers[v] = struct{}{}
	t.activeLocked(v)
	_ = t.applyDeciderLocked() // the input goes on; a failed ioctl is the terminal's end
}

// leaveSize takes a leaving viewer out of the choice; if it decided the
// size, the next most recently active viewer's size applies.
func (v *Viewer) leaveSize() {
	t := v.t
	t.resizeMu.Lock()
	defer t.resizeMu.Unlock()
	v.sizeGone = true
	if _, ok := t.sizers[v]; !ok {
		return
	}
	delete(t.sizers, v)
	if t.latest.Load() == v {
		t.latest.Store(nil)
	}
	if t.decider == v {
		t.decider = nil
		_ = t.applyDeciderLocked()
	}
}

// activeLocked makes v the most recently active viewer (resizeMu held).
func (t *Terminal) activeLocked(v *Viewer) {
	t.sizeClock++
	v.activeAt = t.sizeClock
	t.latest.Store(v)
}

// deciderLocked returns the viewer whose size decides: the most recently
// active one that told its size, or nil (resizeMu held). It walks the
// viewers that took part, only when one of them changed.
func (t *Terminal) deciderLocked() *Viewer {
	var d *Viewer
	for v := range t.sizers {
		if v.sized && v.activeAt > 0 && (d == nil || v.activeAt > d.activeAt) {
			d = v
		}
	}
	return d
}

// applyDeciderLocked sizes the PTY like the deciding viewer, if any
// (resizeMu held). It also undoes a Terminal.Resize made since.
func (t *Terminal) applyDeciderLocked() error {
	d := t.deciderLocked()
	t.decider = d
	if d == nil {
		return nil // no viewer decides: the size stays
	}
	return t.resizeLocked(d.wantRows, d.wantCols)
}

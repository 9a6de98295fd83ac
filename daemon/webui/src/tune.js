// tune.js — sizes a receive window from what the page measures (PROTOCOL.md
// §6, "Changing a window"; docs/protocol-decisions.md, "Adaptive windows"):
// the same rules as the Go daemon's and ahpctl's flow.WindowTuner, so the
// three clients of one path behave alike.
//
//   - the window grows while the stream uses it (at least half of it
//     released in the last round trip) and the round trip stays within
//     queueTargetMs (4 ms) of the smallest: doubling per round trip until the
//     first time the queue bound is hit, then by steps from half
//     queueTargetMs of the rate, doubling while no queue shows (at most an eighth), each
//     only after a new round-trip sample (in slow start, one whose ping
//     went out after the last doubling reached the sender);
//   - when the round trip exceeds the smallest by 2 × queueTargetMs, bytes
//     are queuing on the path, and the window falls to what the path
//     carried per smallest round trip plus queueTargetMs of it, plus what
//     the receiver holds and has not credited (noteHeld), never below the
//     floor;
//   - an idle stream keeps its window; every minRttLifetimeMs the window is
//     halved for one round trip so that a standing queue drains and the
//     smallest round trip is measured again (BBR's ProbeRTT), then comes
//     back by what is released, not at once;
//   - a change smaller than a 64th is not announced.
//
// A page that cannot keep up (xterm.js parsing a flood) sees its own round
// trip grow, since its pings wait behind the same main thread, so its
// window does not grow: the flood is then skipped by snapshot (§8), which
// costs it less than drawing every byte.
//
// DOM-free and clock-free: the caller passes the time (ms).

export const QUEUE_TARGET_MS = 4;
export const MIN_RTT_LIFETIME_MS = 10000;
const MIN_EPOCH_MS = 2;

export class WindowTuner {
  /** cfg: {floor, ceiling, queueTargetMs?, minRttLifetimeMs?}; initial window in UTF-16 bytes. */
  constructor(cfg, initial) {
    this.floor = cfg.floor;
    this.ceiling = Math.max(cfg.ceiling, cfg.floor);
    this.queueTargetMs = cfg.queueTargetMs ?? QUEUE_TARGET_MS;
    this.minRttLifetimeMs = cfg.minRttLifetimeMs ?? MIN_RTT_LIFETIME_MS;
    this.window = Math.min(Math.max(initial, this.floor), this.ceiling);
    this.rtt = 0; // smoothed; 0: no sample yet
    this.last = 0; // the newest sample
    this._fresh = false; // a sample arrived since the window last grew (in slow start: one sent after it acted)
    this._grewAt = -Infinity; // when the window last grew (ms)
    this._heldSum = 0; // what the receiver held (noteHeld): this epoch's sum and count,
    this._heldN = 0;
    this._held = 0; // and the mean of the last epoch that had samples
    this._step = 0; // the last additive step; doubles while no queue shows
    this._rates = new Array(8).fill(0); // released bytes/ms of the last epochs
    this._rateAt = 0;
    this._settle = 0; // epochs to wait after a shrink before another
    this._growRate = 0; // released bytes/ms when the window last grew; 0: never
    this._growFrac = 0; // by how much it grew then
    this.minRtt = 0;
    this._minAt = null;
    this._prevMin = 0;
    this._slowStart = true;
    this._drainDue = false;
    this._restoreTo = 0;
    this._drainLeft = 0; // epochs of the drain still to go
    this._restoreFrom = 0; // the window the restore started from
    this._restoreStart = null; // when (ms)
    this._restoring = 0; // after a drain: the window goes back to this by released bytes
    this._restoreGrow = 0;
    this._restoredInEpoch = false;
    this._epochStart = null;
    this._epochBytes = 0;
  }

  /** onRtt records a round trip (ms) sampled at now (ms). */
  onRtt(now, rtt) {
    rtt = Math.max(rtt, 0.001);
    this.rtt = this.rtt === 0 ? rtt : this.rtt + (rtt - this.rtt) / 4;
    this.last = rtt;
    // In slow start a sample speaks for the last doubling only if its ping
    // went out once the doubled window had reached the sender (half a
    // round trip): doubling on an older one overshoots the path by up to
    // four times its product, not two.
    if (!this._slowStart || now - rtt - this._grewAt >= this.rtt / 2) this._fresh = true;
    if (this._minAt === null || now - this._minAt > this.minRttLifetimeMs) {
      this._drainDue = this._minAt !== null && this.window > this.floor;
      this._prevMin = this.minRtt;
      this.minRtt = rtt;
      this._minAt = now;
    } else if (rtt < this.minRtt) {
      this.minRtt = rtt;
    }
  }

  /** noteHeld records that the receiver holds n bytes of the window that are not in flight (Receiver.held). */
  noteHeld(n) {
    this._heldSum += Math.max(n, 0);
    this._heldN++;
  }

  /** _rateRose: the released rate rose by half the last growth step since it (or it never grew). */
  _rateRose(rate) {
    if (this._growRate === 0) return true;
    return this._growFrac > 0 && rate >= this._growRate * (1 + this._growFrac / 2);
  }

  /** _rateFollowed: the released rate rose with the last growth by 3/4 of it at least. */
  _rateFollowed(rate) {
    return this._growRate > 0 && this._growFrac > 0 && rate >= this._growRate * (1 + this._growFrac * 3 / 4);
  }

  _smallest() {
    return this._prevMin > 0 && this._prevMin < this.minRtt ? this._prevMin : this.minRtt;
  }

  /**
   * onRelease records n bytes released at now; it returns the new window
   * when it changed (to announce with channel/window), else null.
   */
  onRelease(now, n) {
    if (this._epochStart === null) this._epochStart = now;
    this._epochBytes += n;
    if (this._restoring > 0) {
      // After a drain, back over two round trips, a 64th at a time and never
      // faster than bytes are released: the drained stream comes in bursts
      // at the path's full rate, and a restore clocked by them alone sent at
      // twice that rate.
      this._restoreGrow += n;
      if (this._restoreStart === null) this._restoreStart = now;
      const span = 2 * Math.max(this.rtt, MIN_EPOCH_MS);
      const due = this._restoreFrom + Math.floor((this._restoring - this._restoreFrom) * Math.min(1, (now - this._restoreStart) / span));
      const next = Math.min(due, this.window + this._restoreGrow, this._restoring);
      if (next - this.window >= Math.floor(this.window / 64) || next >= this._restoring) {
        this._restoreGrow -= next - this.window;
        if (next >= this._restoring) {
          this._restoring = 0;
          this._step = 0;
          this._restoredInEpoch = true; // this epoch's rate rise says nothing of room
        }
        if (next > this.window) return this._set(next);
      }
    }
    if (this.rtt === 0) return null;
    const elapsed = now - this._epochStart;
    const epoch = Math.max(this.rtt, MIN_EPOCH_MS);
    if (elapsed < epoch) return null;
    const released = this._epochBytes;
    this._epochStart = now;
    this._epochBytes = 0;
    if (this._heldN > 0) {
      this._held = this._heldSum / this._heldN;
      this._heldSum = 0;
      this._heldN = 0;
    }
    if (elapsed > 4 * epoch) return null; // a pause says nothing about the path
    if (this._restoreTo > 0) {
      // The drain lasts two epochs (its gap reaches the receiver a round
      // trip after it is announced; a restore clocked by the releases of
      // the first would send at twice the path's rate); then the window
      // goes back as bytes are released (above), not at once.
      if (--this._drainLeft > 0) return null;
      this._restoring = Math.max(this._restoreTo, this.floor);
      this._restoreFrom = this.window;
      this._restoreStart = null;
      this._restoreTo = 0;
      this._restoreGrow = 0;
      return null;
    }
    if (this._drainDue) {
      this._drainDue = false;
      const half = Math.max(Math.floor(this.window / 2), this.floor);
      if (half < this.window) {
        this._restoreTo = this.window;
        this._drainLeft = 2;
        return this._set(half);
      }
    }
    const restored = this._restoredInEpoch;
    this._restoredInEpoch = false;
    this._rateAt = (this._rateAt + 1) % this._rates.length;
    this._rates[this._rateAt] = released / elapsed;
    if (this._settle > 0) this._settle--;
    const minRtt = this._smallest();
    // Both the smoothed round trip and the newest sample must show a queue
    // to shrink; either suffices to stop growing.
    const queue = Math.min(this.rtt, this.last) - minRtt;
    const growQueue = Math.max(this.rtt, this.last) - minRtt;
    const perRtt = released * this.rtt / elapsed;
    const rate = released / elapsed; // bytes per ms
    let next = this.window;
    let grew = false;
    // A standing queue: the window the path needs, from the highest
    // released rate of the last epochs (a shrink starves the pipe for a
    // round trip), plus what the receiver holds on average, which is not
    // in flight. When that is not below the window (the round trip is
    // noisy, not queued), growth is considered.
    let shrink = 0;
    if (queue > 2 * this.queueTargetMs) {
      this._step = 0;
      if (this._settle === 0) {
        const best = Math.max(...this._rates);
        const bdp = Math.max(Math.floor(best * (minRtt + this.queueTargetMs) + this._held), this.floor);
        if (bdp < this.window - Math.floor(this.window / 64)) shrink = bdp;
      }
    }
    if (shrink > 0) {
      this._slowStart = false;
      this._restoring = 0;
      next = shrink;
      this._settle = 2;
    } else if (queue > 2 * this.queueTargetMs && this._settle > 0) {
      // The last shrink has not acted yet.
    } else if (this._restoring > 0 || restored) {
      // Coming back from a drain: no growth on top, nor on the epoch it came back in.
    } else if (perRtt >= this.window / 2 && this._fresh &&
               (growQueue <= this.queueTargetMs || this._rateRose(rate))) {
      // Each growth waits for a round trip measured after the last one, and
      // needs a round trip within the target or, through a noisier round
      // trip, a delivery rate that rose with the last step.
      if (this._slowStart) {
        next = this.window * 2;
      } else {
        // Additive from half queueTargetMs of the rate, doubling while no
        // queue shows (at most half the target), at most an eighth.
        const base = Math.max(Math.floor(rate * this.queueTargetMs / 2), Math.floor(this.window / 64));
        // It doubles while no queue shows, or while the delivery rate rose
        // with the last step as much as the window did (the window, not
        // the path, limits the stream), else starts over.
        this._step = this._step === 0 || (growQueue > this.queueTargetMs / 2 && !this._rateFollowed(rate)) ? base : this._step * 2;
        this._step = Math.min(Math.max(this._step, base), Math.floor(this.window / 8));
        next = this.window + this._step;
      }
      next = Math.min(next, this.ceiling);
      grew = true;
    } else if (growQueue > this.queueTargetMs) {
      this._step = 0;
      // Both the smoothed and the newest round trip show a queue: one
      // noisy sample does not end slow start.
      if (queue > 2 * this.queueTargetMs) this._slowStart = false;
    } else if (growQueue > this.queueTargetMs / 2) {
      this._step = 0;
    }
    next = Math.min(Math.max(next, this.floor), this.ceiling);
    const d = next - this.window;
    // A change under a 64th is not worth a channel/window.
    const least = Math.floor(this.window / 64); // as the step's least, or a step is refused
    if (d === 0 || (d > 0 && d < least && next !== this.ceiling) ||
        (d < 0 && -d < least && next !== this.floor)) {
      return null;
    }
    if (grew && d > 0) {
      // Only a growth that took place is one to wait on and judge the next by.
      this._fresh = false;
      this._grewAt = now;
      this._growRate = rate;
      this._growFrac = d / this.window;
    }
    return this._set(next);
  }

  _set(next) {
    if (next === this.window) return null;
    this.window = next;
    return next;
  }
}

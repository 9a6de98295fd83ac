// tune.js — sizes a receive window from what the page measures (PROTOCOL.md
// §6, "Changing a window"; docs/protocol-decisions.md, "Adaptive windows"):
// the same rules as the Go daemon's and ahpctl's flow.WindowTuner, so the
// three clients of one path behave alike.
//
//   - the window grows while the stream uses it (at least half of it
//     released in the last round trip) and the round trip stays within
//     queueTargetMs (4 ms) of the smallest: doubling per round trip until the
//     first time the queue bound is hit, then by steps from queueTargetMs
//     of the rate, doubling while no queue shows (at most an eighth), each
//     only after a new round-trip sample;
//   - when the round trip exceeds the smallest by 2 × queueTargetMs, bytes
//     are queuing on the path, and the window falls to what the path
//     carried per smallest round trip plus queueTargetMs of it, and an
//     eighth more for credit not yet announced, never below the floor;
//   - an idle stream keeps its window; every minRttLifetimeMs the window is
//     halved for one round trip so that a standing queue drains and the
//     smallest round trip is measured again (BBR's ProbeRTT);
//   - a change smaller than a 32nd is not announced.
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
    this._fresh = false; // a sample arrived since the window last grew
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
    this._epochStart = null;
    this._epochBytes = 0;
  }

  /** onRtt records a round trip (ms) sampled at now (ms). */
  onRtt(now, rtt) {
    rtt = Math.max(rtt, 0.001);
    this.rtt = this.rtt === 0 ? rtt : this.rtt + (rtt - this.rtt) / 4;
    this.last = rtt;
    this._fresh = true;
    if (this._minAt === null || now - this._minAt > this.minRttLifetimeMs) {
      this._drainDue = this._minAt !== null && this.window > this.floor;
      this._prevMin = this.minRtt;
      this.minRtt = rtt;
      this._minAt = now;
    } else if (rtt < this.minRtt) {
      this.minRtt = rtt;
    }
  }

  /** _rateRose: the released rate rose by half the last growth step since it (or it never grew). */
  _rateRose(rate) {
    if (this._growRate === 0) return true;
    return this._growFrac > 0 && rate >= this._growRate * (1 + this._growFrac / 2);
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
    if (this.rtt === 0) return null;
    const elapsed = now - this._epochStart;
    const epoch = Math.max(this.rtt, MIN_EPOCH_MS);
    if (elapsed < epoch) return null;
    const released = this._epochBytes;
    this._epochStart = now;
    this._epochBytes = 0;
    if (elapsed > 4 * epoch) return null; // a pause says nothing about the path
    if (this._restoreTo > 0) {
      const next = Math.max(this._restoreTo, this.floor);
      this._restoreTo = 0;
      return this._set(next);
    }
    if (this._drainDue) {
      this._drainDue = false;
      const half = Math.max(Math.floor(this.window / 2), this.floor);
      if (half < this.window) {
        this._restoreTo = this.window;
        return this._set(half);
      }
    }
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
    // A standing queue: the window the path needs, from the highest
    // released rate of the last epochs (a shrink starves the pipe for a
    // round trip). An eighth of the window is released and not yet
    // credited on average (credit goes per quarter window): 7/8 of it is
    // in flight. When that is not below the window (the round trip is
    // noisy, not queued), growth is considered.
    let shrink = 0;
    if (queue > 2 * this.queueTargetMs) {
      this._step = 0;
      if (this._settle === 0) {
        const best = Math.max(...this._rates);
        const bdp = Math.max(Math.floor(best * (minRtt + this.queueTargetMs) * 8 / 7), this.floor);
        if (bdp < this.window - this.window / 32) shrink = bdp;
      }
    }
    if (shrink > 0) {
      this._slowStart = false;
      next = shrink;
      this._settle = 2;
    } else if (queue > 2 * this.queueTargetMs && this._settle > 0) {
      // The last shrink has not acted yet.
    } else if (perRtt >= this.window / 2 && this._fresh &&
               (growQueue <= this.queueTargetMs || this._rateRose(rate))) {
      // Each growth waits for a round trip measured after the last one, and
      // needs a round trip within the target or, through a noisier round
      // trip, a delivery rate that rose with the last step.
      this._fresh = false;
      if (this._slowStart) {
        next = this.window * 2;
      } else {
        // Additive from queueTargetMs of the rate, doubling while no queue
        // shows (at most half the target), at most an eighth.
        const base = Math.max(Math.floor(rate * this.queueTargetMs), Math.floor(this.window / 64));
        this._step = this._step === 0 || growQueue > this.queueTargetMs / 2 ? base : this._step * 2;
        this._step = Math.min(Math.max(this._step, base), Math.floor(this.window / 8));
        next = this.window + this._step;
      }
      next = Math.min(next, this.ceiling);
      this._growRate = rate;
      this._growFrac = (next - this.window) / this.window;
    } else if (growQueue > this.queueTargetMs) {
      this._step = 0;
      if (growQueue > 2 * this.queueTargetMs) this._slowStart = false;
    } else if (growQueue > this.queueTargetMs / 2) {
      this._step = 0;
    }
    next = Math.min(Math.max(next, this.floor), this.ceiling);
    const d = next - this.window;
    // A change under a 32nd is not worth a channel/window.
    if (d === 0 || (d > 0 && d < this.window / 32 && next !== this.ceiling) ||
        (d < 0 && -d < this.window / 32 && next !== this.floor)) {
      return null;
    }
    return this._set(next);
  }

  _set(next) {
    if (next === this.window) return null;
    this.window = next;
    return next;
  }
}

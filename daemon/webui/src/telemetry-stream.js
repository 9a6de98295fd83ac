// telemetry-stream.js — applies a telemetry channel's logical messages to a
// TelemetryModel once per animation frame and releases them after the frame
// that drew them: the DOM-free half of the telemetry views (telemetry.js,
// process-status.js), so node tests drive it with a fake requestAnimationFrame.
//
// Credit follows drawing (PROTOCOL.md §5: "the telemetry sample was drawn"):
// a message is held, unapplied, until the next frame; that frame applies
// every held message in stream order, calls draw(), and only then releases
// them. A hidden tab (no frames) or a page too slow to draw therefore stops
// crediting: the host's window closes, its queue for this viewer overflows,
// and it sends telemetry/dropped, which the model draws as a gap. What the
// page holds is bounded by the receive window plus one message, and the
// model's rings are fixed-size, so memory stays flat however fast the source.

/**
 * Receive limits a telemetry view asks for: batches are at most 4 KiB
 * (docs/protocol-decisions.md), so a small window suffices for thousands of
 * samples a second and bounds what a stalled page holds.
 */
export const TELEMETRY_RECEIVE = Object.freeze({
  windowBytes: 64 * 1024,
  maximumFrameBytes: 16 * 1024,
  maximumMessageBytes: 64 * 1024,
});

/**
 * telemetryConsumer returns {onMessage, flush, pause, resume, pending} for
 * Session.subscribe/Client.attach.
 * options:
 *   model           a TelemetryModel (telemetry-store.js)
 *   requestFrame    (fn) => void, e.g. requestAnimationFrame
 *   draw(changed)   draws the model; changed is whether any message changed it
 *   onReady()       channel/ready was applied (optional)
 */
export function telemetryConsumer({ model, requestFrame, draw, onReady }) {
  let held = []; // [{msg, release}] waiting for the next frame, in stream order
  let scheduled = false;
  let paused = false;

  const schedule = () => {
    if (scheduled || paused || held.length === 0) return;
    scheduled = true;
    requestFrame(frame);
  };

  function frame() {
    scheduled = false;
    if (paused) return;
    const batch = held;
    held = [];
    let changed = false;
    let ready = false;
    for (const { msg } of batch) {
      try {
        if (model.apply(msg)) changed = true;
      } catch {
        // A malformed message is consumed by ignoring it; never wedge credit.
      }
      if (msg.method === 'channel/ready') ready = true;
    }
    try {
      draw(changed);
    } finally {
      // Released after the draw, in stream order: credit follows the frame.
      for (const { release } of batch) release();
    }
    if (ready) onReady?.();
    schedule(); // messages that arrived during draw()
  }

  return {
    onMessage(msg, release) {
      held.push({ msg, release });
      schedule();
    },
    /** pending is the number of messages waiting for a frame. */
    get pending() {
      return held.length;
    },
    /** pause stops applying and releasing (a test hook: withholds credit). */
    pause() {
      paused = true;
    },
    /** resume starts drawing (and so crediting) again. */
    resume() {
      paused = false;
      schedule();
    },
    /** reset forgets held messages without releasing them (the subscription ended). */
    reset() {
      held = [];
    },
  };
}

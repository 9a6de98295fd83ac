// process-status.js — a terminal's process telemetry in the status line: a
// small CPU sparkline, the CPU share and the RSS, from the telemetry channel
// the daemon titles `processes of <terminal URI>` (a `--kind process
// --terminal URI` channel; samples as in telemetry/process.go:
// process_cpu_usage_ratio, 1 = one core busy, and
// process_resident_memory_bytes, both summed over the process tree).
//
// Like the telemetry view it applies messages once per animation frame and
// releases them after the frame that drew them (telemetry-stream.js), and
// keeps a fixed ring of points.

import { TelemetryModel } from './telemetry-store.js';
import { TELEMETRY_RECEIVE, telemetryConsumer } from './telemetry-stream.js';
import { bytes, percent } from './format.js';

export const CPU = 'process_cpu_usage_ratio';
export const RSS = 'process_resident_memory_bytes';
/** Points of the sparkline. */
export const SPARK_POINTS = 60;

/** PROCESS_TITLE_PREFIX starts the title of every terminal's process channel. */
export const PROCESS_TITLE_PREFIX = 'processes of ';
/** processTitle is the title the daemon gives the process channel of a terminal. */
export const processTitle = (terminalUri) => PROCESS_TITLE_PREFIX + terminalUri;

/** findProcessChannel returns the telemetry channel of the terminal's processes, if listed. */
export function findProcessChannel(channels, terminalUri) {
  const want = processTitle(terminalUri);
  return channels.find((c) => c.type === 'telemetry' && c.title === want) ?? null;
}

/**
 * createProcessStatus builds the status-line element (hidden until a channel
 * is shown) and returns {el, start(channel), stop(), consumer, state()}.
 * consumer is for Client.attach (with receive: TELEMETRY_RECEIVE).
 */
export function createProcessStatus() {
  const el = document.createElement('span');
  el.className = 'proc';
  el.dataset.testid = 'status-process';
  el.hidden = true;
  const canvas = document.createElement('canvas');
  canvas.dataset.testid = 'status-sparkline';
  canvas.className = 'spark';
  const W = 64;
  const H = 14;
  const dpr = Math.max(1, Math.round(globalThis.devicePixelRatio || 1));
  canvas.width = W * dpr;
  canvas.height = H * dpr;
  canvas.style.width = `${W}px`;
  canvas.style.height = `${H}px`;
  const cpu = document.createElement('span');
  cpu.dataset.testid = 'status-cpu';
  const rss = document.createElement('span');
  rss.dataset.testid = 'status-rss';
  el.append(canvas, cpu, rss);

  let channel = null;
  let model = null;
  let stream = null;
  let drawn = 0;

  function draw() {
    const c = model.chart(CPU)?.series[0];
    const r = model.chart(RSS)?.series[0];
    cpu.textContent = c?.last !== undefined ? `CPU ${percent(c.last)}` : 'CPU —';
    rss.textContent = r?.last !== undefined ? `RSS ${bytes(r.last)}` : '';
    el.title = `${channel}: CPU of the terminal's processes (1 core = 100%) and their resident memory`;
    const ctx = canvas.getContext('2d');
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const vals = [];
    if (c) {
      for (let i = 0; i < c.values.length; i++) {
        const v = c.values.get(i);
        vals.push(typeof v === 'number' ? v : null);
      }
    }
    let max = 1; // one core; more when the tree uses several
    for (const v of vals) if (v != null && v > max) max = v;
    const step = W / (SPARK_POINTS - 1);
    const x0 = W - (vals.length - 1) * step;
    const y = (v) => H - 1 - (v / max) * (H - 2);
    ctx.lineWidth = 1.25;
    ctx.strokeStyle = '#4ec27a';
    ctx.fillStyle = 'rgba(78, 194, 122, 0.18)';
    // Runs of numbers; a null (a dropped range) breaks the line.
    let run = [];
    const flush = () => {
      if (run.length === 0) return;
      ctx.beginPath();
      run.forEach(([x, v], i) => (i ? ctx.lineTo(x, y(v)) : ctx.moveTo(x, y(v))));
      ctx.stroke();
      ctx.lineTo(run[run.length - 1][0], H);
      ctx.lineTo(run[0][0], H);
      ctx.closePath();
      ctx.fill();
      run = [];
    };
    vals.forEach((v, i) => (v == null ? flush() : run.push([x0 + i * step, v])));
    flush();
    drawn++;
    el.dataset.points = String(vals.filter((v) => v != null).length);
  }

  return {
    el,
    receive: TELEMETRY_RECEIVE,
    /** start shows the process channel ch (a new model). */
    start(ch) {
      channel = ch;
      model = new TelemetryModel({ capacity: SPARK_POINTS, maxSeries: 1, maxCharts: 2, accept: (n) => n === CPU || n === RSS });
      stream?.reset();
      stream = telemetryConsumer({ model, requestFrame: (fn) => requestAnimationFrame(fn), draw });
      el.dataset.channel = ch;
      cpu.textContent = 'CPU …';
      rss.textContent = '';
      el.hidden = false;
    },
    /** stop hides it. */
    stop() {
      channel = null;
      stream?.reset();
      el.hidden = true;
      delete el.dataset.channel;
    },
    get channel() {
      return channel;
    },
    consumer: {
      onMessage(msg, release, s) {
        if (!stream || s.channel !== channel) return release();
        stream.onMessage(msg, release);
      },
    },
    state() {
      if (!model) return null;
      const c = model.chart(CPU)?.series[0];
      let cpuMax = null;
      for (let i = 0; c && i < c.values.length; i++) {
        const v = c.values.get(i);
        if (typeof v === 'number' && (cpuMax === null || v > cpuMax)) cpuMax = v;
      }
      return { channel, drawn, stats: { ...model.stats }, cpu: c?.last ?? null, cpuMax, rss: model.chart(RSS)?.series[0]?.last ?? null };
    },
  };
}

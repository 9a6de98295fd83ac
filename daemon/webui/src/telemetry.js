// telemetry.js — the telemetry view: live uPlot line charts for `telemetry`
// channels (PROTOCOL.md §8). It follows the view interface at the top of
// session.js (kind, createView; the view is a Client.attach consumer plus
// setRole and dispose), beside terminal.js.
//
//   - one chart per metric name (at most DEFAULT_MAX_CHARTS), one line per
//     series (name + labels; at most DEFAULT_MAX_SERIES per chart, the rest
//     counted in the chart's title);
//   - each chart keeps a fixed ring of rows (telemetry-store.js), so memory
//     is flat however long the page runs and however fast the source;
//   - telemetry/dropped is a gap: a null row (uPlot breaks the lines) and a
//     shaded band over the lost time span, and the header counts the
//     samples lost;
//   - messages are applied once per animation frame and released after the
//     frame that drew them (telemetry-stream.js): credit follows drawing.
//
// Telemetry channels take no client messages, so the role changes nothing.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { TelemetryModel } from './telemetry-store.js';
import { TELEMETRY_RECEIVE, telemetryConsumer } from './telemetry-stream.js';

export { TELEMETRY_RECEIVE };
import { formatterFor, number } from './format.js';

/** kind is the channels/list type this view shows. */
export const kind = 'telemetry';

const PALETTE = ['#5fb3f9', '#4ec27a', '#e0b04a', '#c792ea', '#ef6b6b', '#56d4dd', '#f78c6c', '#a9b665'];
const CHART_HEIGHT = 210;
// The axes take the page theme's colours (style.css --muted, --line) at
// every draw, so a theme switch recolours the charts at their next frame.
const cssVar = (name, fallback) =>
  (typeof getComputedStyle === 'function' && getComputedStyle(document.documentElement).getPropertyValue(name).trim()) || fallback;
const AXIS = {
  stroke: () => cssVar('--muted', '#7d8590'),
  font: '11px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace',
  grid: { stroke: () => cssVar('--grid', '#20252d'), width: 1 },
  ticks: { stroke: () => cssVar('--line', '#262b33'), width: 1, size: 4 },
};
const GAP_FILL = 'rgba(239, 107, 107, 0.13)';
const GAP_EDGE = 'rgba(239, 107, 107, 0.7)';
const gapText = () => cssVar('--gap-text', '#f4a3a3');

/**
 * createView builds the telemetry view in container. hooks (all optional):
 * onReady() channel/ready applied; onChange() the header counters changed.
 * The view also has state(), model and stream (pause/resume), for tests.
 */
export function createView(container, hooks = {}) {
  const root = div('telemetry');
  root.dataset.testid = 'telemetry';
  const head = div('tele-head');
  const title = span('tele-title', 'telemetry-title');
  const rate = span('tele-stat', 'telemetry-rate');
  const seriesCount = span('tele-stat', 'telemetry-series');
  const lost = span('tele-lost', 'telemetry-lost');
  head.append(title, rate, seriesCount, span('spacer'), lost);
  const grid = div('tele-grid');
  grid.dataset.testid = 'telemetry-charts';
  const empty = div('tele-empty');
  empty.textContent = 'waiting for samples…';
  const hidden = div('tele-hidden');
  root.append(head, empty, grid, hidden);
  container.append(root);

  let channel = null;
  let sub = null;
  let model = null;
  let stream = null;
  const plots = new Map(); // metric name → {card, el, u, seriesDrawn, version}
  let rateAt = 0;
  let rateSamples = 0;
  let samplesPerSecond = null;

  function start(ch) {
    for (const p of plots.values()) p.u.destroy();
    plots.clear();
    grid.replaceChildren();
    hidden.textContent = '';
    channel = ch;
    model = new TelemetryModel();
    stream?.reset();
    stream = telemetryConsumer({
      model,
      requestFrame: (fn) => requestAnimationFrame(fn),
      draw,
      onReady: () => hooks.onReady?.(),
    });
    rateAt = 0;
    samplesPerSecond = null;
    title.textContent = ch;
    renderHead();
  }

  function draw() {
    for (const chart of model.charts.values()) {
      let p = plots.get(chart.name);
      if (!p) p = makePlot(chart);
      if (p.version === chart.version) continue;
      while (p.seriesDrawn < chart.series.length) {
        const i = p.seriesDrawn++;
        p.u.addSeries(seriesOpts(chart, chart.series[i], i), i + 1);
      }
      p.version = chart.version;
      const data = chart.data();
      p.u.batch((u) => u.setData(data)); // drawn now, not in a microtask: credit follows this
      p.card.dataset.points = String(chart.points);
      p.card.dataset.gaps = String(chart.visibleGaps().length);
      const more = chart.hiddenSeries.size;
      p.more.textContent = more ? `+${more} series not shown` : '';
    }
    const hc = model.hiddenCharts.size;
    hidden.textContent = hc ? `${hc} more metric${hc === 1 ? '' : 's'} not shown (at most ${model.maxCharts} charts)` : '';
    empty.hidden = model.charts.size > 0;
    renderHead();
  }

  function renderHead() {
    if (!model) return;
    const st = model.stats;
    const now = performance.now();
    if (!rateAt || now - rateAt > 3000) {
      // First draw, or none for a while (a hidden tab, a stall): start over
      // rather than average the pause in.
      rateAt = now;
      rateSamples = st.samples;
    } else if (now - rateAt >= 1000) {
      samplesPerSecond = ((st.samples - rateSamples) * 1000) / (now - rateAt);
      rateAt = now;
      rateSamples = st.samples;
    }
    rate.textContent = samplesPerSecond == null ? '' : `${number(Math.round(samplesPerSecond))} samples/s`;
    let n = 0;
    for (const c of model.charts.values()) n += c.series.length;
    seriesCount.textContent = `${n} series · ${model.charts.size} chart${model.charts.size === 1 ? '' : 's'}`;
    lost.dataset.lost = String(st.lostSamples);
    lost.dataset.dropped = String(st.droppedMessages);
    lost.classList.toggle('bad', st.droppedMessages > 0);
    lost.textContent = st.droppedMessages === 0 ? 'no samples lost'
      : `lost ${st.lostSamples.toLocaleString('en-US')} sample${st.lostSamples === 1 ? '' : 's'} in ${st.gaps} gap${st.gaps === 1 ? '' : 's'}`;
    hooks.onChange?.();
  }

  function makePlot(chart) {
    const card = document.createElement('section');
    card.className = 'tele-card';
    card.dataset.testid = 'telemetry-chart';
    card.dataset.name = chart.name;
    const h = document.createElement('h3');
    const name = document.createElement('span');
    name.textContent = chart.name;
    const more = span('more');
    h.append(name, more);
    const el = div('tele-plot');
    card.append(h, el);
    grid.append(card);
    const fmt = formatterFor(chart.name);
    const u = new uPlot({
      width: plotWidth(el),
      height: CHART_HEIGHT,
      ms: 1, // sample times are Unix milliseconds
      pxAlign: false,
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      legend: { show: true, live: true },
      scales: { x: { time: true } },
      axes: [
        { ...AXIS },
        { ...AXIS, size: 64, values: (_u, splits) => splits.map(fmt) },
      ],
      series: [{ label: 'time' }],
      hooks: { drawClear: [(u) => drawGaps(u, chart)] },
    }, [[]], el);
    const p = { card, el, u, more, seriesDrawn: 0, version: -1 };
    plots.set(chart.name, p);
    return p;
  }

  // Resize every chart to its card's width.
  const observer = new ResizeObserver(() => {
    for (const p of plots.values()) {
      const w = plotWidth(p.el);
      if (w !== p.u.width) p.u.setSize({ width: w, height: CHART_HEIGHT });
    }
  });
  observer.observe(grid);

  return {
    kind,
    onSubscribed(s) {
      if (s.channel !== channel) start(s.channel);
      sub = s;
    },
    onMessage(msg, release, s) {
      // Frames may arrive before onSubscribed (they follow the subscribe
      // result in the same read): the subscription names the channel.
      if (s && s.channel !== channel) start(s.channel);
      stream.onMessage(msg, release);
    },
    onEnd(_info, s) {
      if (sub === s) sub = null;
    },
    setRole() {},
    /**
     * clear forgets what was drawn, so the next subscription starts afresh
     * (the page calls it when the user attaches; a reconnect keeps the
     * charts and skips the replayed batches instead).
     */
    clear() {
      channel = null;
    },
    /** setTitle shows the channel's channels/list title in the header. */
    setTitle(t) {
      title.textContent = t && t !== channel ? `${t} — ${channel}` : channel ?? '';
    },
    get model() {
      return model;
    },
    get stream() {
      return stream;
    },
    /** state returns what the view shows, for tests. */
    state() {
      if (!model) return null;
      return {
        channel,
        stats: { ...model.stats },
        lastSeq: model.lastSeq,
        pending: stream.pending,
        samplesPerSecond,
        charts: [...model.charts.values()].map((c) => ({
          name: c.name,
          points: c.points,
          capacity: c.capacity,
          drawnPoints: plots.get(c.name)?.u.data[0]?.length ?? 0,
          series: c.series.map((s) => s.label),
          hiddenSeries: c.hiddenSeries.size,
          gaps: c.visibleGaps().length,
          nullRows: countNullRows(c),
        })),
      };
    },
    dispose() {
      observer.disconnect();
      stream?.reset();
      for (const p of plots.values()) p.u.destroy();
      plots.clear();
      root.remove();
    },
  };
}

function seriesOpts(chart, s, i) {
  const fmt = formatterFor(chart.name);
  return {
    label: s.label,
    stroke: PALETTE[i % PALETTE.length],
    width: 1.5,
    spanGaps: false, // null (a dropped range) breaks the line; undefined is spanned
    points: { show: false },
    value: (_u, v) => (v == null ? '—' : fmt(v)),
  };
}

// drawGaps shades the time span of every dropped range, under the lines.
function drawGaps(u, chart) {
  const gaps = chart.visibleGaps();
  if (gaps.length === 0) return;
  const { ctx, bbox } = u;
  ctx.save();
  ctx.beginPath();
  ctx.rect(bbox.left, bbox.top, bbox.width, bbox.height);
  ctx.clip();
  for (const g of gaps) {
    const x0 = u.valToPos(g.from, 'x', true);
    const x1 = u.valToPos(g.to, 'x', true);
    const w = Math.max(x1 - x0, 2);
    ctx.fillStyle = GAP_FILL;
    ctx.fillRect(x0, bbox.top, w, bbox.height);
    ctx.fillStyle = GAP_EDGE;
    ctx.fillRect(x0, bbox.top, 1, bbox.height);
    ctx.fillRect(x0 + w - 1, bbox.top, 1, bbox.height);
    // The loss, written in the band when it is wide enough (the whole
    // range's count: every chart shows the same channel-wide loss).
    const label = g.count == null ? 'gap' : `${g.count.toLocaleString('en-US')} lost`;
    ctx.font = `${Math.round(11 * devicePixelRatio)}px ui-monospace, Menlo, Consolas, monospace`;
    const tw = ctx.measureText(label).width;
    if (w > tw + 8) {
      ctx.fillStyle = gapText();
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      ctx.fillText(label, x0 + w / 2, bbox.top + 6 * devicePixelRatio);
    }
  }
  ctx.restore();
}

function countNullRows(chart) {
  const s = chart.series[0];
  if (!s) return 0;
  let n = 0;
  for (let i = 0; i < s.values.length; i++) if (s.values.get(i) === null) n++;
  return n;
}

function plotWidth(el) {
  return Math.max(240, Math.floor(el.clientWidth || el.parentElement?.clientWidth || 480));
}

function div(cls) {
  const d = document.createElement('div');
  d.className = cls;
  return d;
}

function span(cls, testid) {
  const s = document.createElement('span');
  s.className = cls;
  if (testid) s.dataset.testid = testid;
  return s;
}

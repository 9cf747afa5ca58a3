// A uPlot time-series chart that follows its container's width and the page's theme.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// series: [{ label, values, color (a CSS variable name) }]; x: Unix milliseconds.
export function Chart({ title, x, series, fmt = (v) => String(v), height = 170, theme, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  const key = series.map((s) => s.label).join('|') + '|' + theme;

  const data = () => [x.map((t) => t / 1000), ...series.map((s) => s.values)];

  useEffect(() => {
    const el = box.current;
    const axis = { stroke: cssVar('--muted'), grid: { stroke: cssVar('--grid'), width: 1 }, ticks: { show: false } };
    const opts = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [axis, { ...axis, values: (u, vals) => vals.map(fmt), size: 56 }],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: cssVar(s.color),
          width: 2,
          spanGaps: false,
          value: (u, v) => (v == null ? '–' : fmt(v)),
        })),
      ],
    };
    plot.current = new uPlot(opts, data(), el);
    const ro = new ResizeObserver(() => plot.current && plot.current.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [key]);

  useEffect(() => {
    if (plot.current) plot.current.setData(data());
  });

  return (
    <figure class="chart" data-testid={testid}>
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title} chart over the last minutes`} />
    </figure>
  );
}

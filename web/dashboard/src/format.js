// Number formats of the dashboard.
export const dash = '–';
export function num(v, digits = 1) {
  if (v == null || Number.isNaN(v)) return dash;
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return Number(v).toFixed(digits).replace(/\.0+$/, '');
}
export function int(v) {
  return v == null ? dash : Math.round(v).toLocaleString('en-US');
}
export function pct(v) {
  return v == null ? dash : `${(v * 100).toFixed(v >= 0.995 || v === 0 ? 0 : 1)}%`;
}
export function secs(v) {
  if (v == null) return dash;
  if (v < 1) return `${Math.round(v * 1000)} ms`;
  return `${v.toFixed(v < 10 ? 2 : 1)} s`;
}
export function bytes(v) {
  if (v == null) return dash;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 && i > 0 ? 1 : 0)} ${units[i]}`;
}

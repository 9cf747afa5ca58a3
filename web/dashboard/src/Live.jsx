// The live view: the whole box, its alerts, and per served model the numbers and charts of the
// last minutes (GET /stats, refreshed every second).
import { useState } from 'preact/hooks';
import { apiKey } from './api.js';
import { Chart } from './Chart.jsx';
import { bytes, int, num, pct, secs } from './format.js';

function Tile({ label, value, sub, tone, testid }) {
  return (
    <div class={`tile ${tone || ''}`}>
      <div class="tile-label">{label}</div>
      <div class="tile-value" data-testid={testid}>
        {value}
      </div>
      {sub && <div class="tile-sub">{sub}</div>}
    </div>
  );
}

const stateTone = { ready: 'ok', profiling: 'info', saturated: 'warn', loading: 'info', failed: 'bad', stopped: 'bad' };

export function StateChip({ state }) {
  return <span class={`chip ${stateTone[state] || 'info'}`}>{state}</span>;
}

function Alerts({ alerts }) {
  if (!alerts.length)
    return (
      <p class="alerts-none" data-testid="alerts">
        <span class="chip ok">no alerts</span> queue, 429s, 5xx, upstream breaker and the latency SLO are fine
      </p>
    );
  return (
    <ul class="alerts" data-testid="alerts" aria-live="polite">
      {alerts.map((a) => (
        <li key={a.name + a.model} class={`alert ${a.severity}`}>
          <strong>{a.name}</strong> <span class="chip">{a.state}</span> {a.model && <em>{a.model}</em>}: {a.message}
          {a.active_for_s > 0 && <span class="muted"> (for {Math.round(a.active_for_s)} s)</span>}
        </li>
      ))}
    </ul>
  );
}

function ModelView({ m, h, x, theme }) {
  const id = m.name;
  const queueTone = m.max_queue && m.waiting >= 0.8 * m.max_queue ? 'warn' : '';
  const lat = m.latency_1m;
  const ttft = m.ttft_1m;
  const acc = m.spec.acceptance_ratio;
  return (
    <section class="model" aria-labelledby={`m-${id}`}>
      <h2 id={`m-${id}`}>
        <span data-testid="model-name">{m.name}</span> <span class="muted">{m.tier}</span> <StateChip state={m.state} />
      </h2>
      <div class="tiles">
        <Tile label="requests/s" value={num(m.req_s, 2)} testid={`req-s-${id}`} />
        <Tile label="tokens/s" value={num(m.tok_s)} testid={`tok-s-${id}`} />
        <Tile label="latency p50 / p95 / p99 (1 min)" value={`${secs(lat.p50)} · ${secs(lat.p95)} · ${secs(lat.p99)}`} sub={`${int(lat.count)} requests`} />
        <Tile label="TTFT p50 / p95 / p99" value={`${secs(ttft.p50)} · ${secs(ttft.p95)} · ${secs(ttft.p99)}`} />
        <Tile label="queue" value={`${m.waiting} / ${m.max_queue}`} tone={queueTone} testid={`queue-${id}`} />
        <Tile label="running / batch cap" value={`${m.running} / ${m.batch_cap}`} sub={`max ${m.max_batch_size}`} />
        <Tile label="KV pool in use" value={pct(m.kv_usage_ratio)} tone={m.kv_usage_ratio > 0.9 ? 'warn' : ''} />
        <Tile label="prefix-cache hits" value={pct(m.prefix_hit_ratio)} />
        {m.recurrent_state_bytes_reserved > 0 && (
          <Tile label="recurrent state in use / reserved" testid={`state-mem-${id}`}
            value={`${bytes(m.recurrent_state_bytes_in_use)} / ${bytes(m.recurrent_state_bytes_reserved)}`}
            sub={`snapshots ${bytes(m.recurrent_snapshot_bytes)}`} />
        )}
        {m.kv_disk && (() => {
          const t = m.kv_disk.prefix_blocks;
          const all = t.ram + t.disk + t.miss;
          // Hybrid models persist recurrent-state snapshots beside the KV blocks: their counters too.
          const s = m.kv_disk.snapshots;
          const snaps = s && (m.recurrent_state_bytes_reserved > 0 || s.files + s.writes + s.reads + s.skipped > 0);
          return (
            <Tile label="prefix blocks: RAM / disk / miss" testid={`kv-disk-${id}`}
              value={all ? `${pct(t.ram / all)} · ${pct(t.disk / all)} · ${pct(t.miss / all)}` : '–'}
              tone={m.kv_disk.enabled ? (snaps && s.skipped > 0 ? 'warn' : '') : 'warn'}
              sub={<>
                {`${bytes(m.kv_disk.bytes)} on disk${m.kv_disk.enabled ? '' : ' · writes off'}`}
                {snaps && <span data-testid={`kv-disk-snapshots-${id}`}>
                  <br />{`snapshots: ${int(s.files)} on disk · ${int(s.reads)} read · ${int(s.writes)} written · ${int(s.skipped)} skipped`}
                </span>}
              </>} />
          );
        })()}
        <Tile label="speculative acceptance" value={acc == null ? 'off / none' : pct(acc)} sub={m.spec.draft_tokens ? `${int(m.spec.accepted_tokens)} of ${int(m.spec.draft_tokens)} drafted` : ''} />
        <Tile label="requests" value={int(m.requests_total)} testid={`requests-${id}`} sub={`${int(m.generated_tokens_total)} tokens out`} />
        <Tile label="429 / 5xx" value={`${int(m.rejected_total)} / ${int(m.server_errors_total)}`} tone={m.server_errors_total > 0 ? 'bad' : m.rejected_total > 0 ? 'warn' : ''} />
      </div>
      {h && (
        <div class="charts">
          <Chart title="tokens/s" testid={`chart-tokens-${id}`} theme={theme} x={x} fmt={(v) => num(v)}
            series={[{ label: 'tokens/s', values: h.tok_s, color: '--c1' }]} />
          <Chart title="requests/s" testid={`chart-requests-${id}`} theme={theme} x={x} fmt={(v) => num(v, 2)}
            series={[{ label: 'all', values: h.req_s, color: '--c2' }, { label: '429', values: h.rejected_s, color: '--c3' }, { label: '5xx', values: h.errors_s, color: '--c4' }]} />
          <Chart title="latency (10 s window)" theme={theme} x={x} fmt={secs}
            series={[{ label: 'p50', values: h.p50, color: '--c1' }, { label: 'p95', values: h.p95, color: '--c3' }, { label: 'p99', values: h.p99, color: '--c4' }]} />
          <Chart title="time to first token" theme={theme} x={x} fmt={secs}
            series={[{ label: 'p50', values: h.ttft_p50, color: '--c1' }, { label: 'p95', values: h.ttft_p95, color: '--c3' }, { label: 'p99', values: h.ttft_p99, color: '--c4' }]} />
          <Chart title="queue and batch" theme={theme} x={x} fmt={(v) => num(v, 0)}
            series={[{ label: 'waiting', values: h.waiting, color: '--c4' }, { label: 'running', values: h.running, color: '--c1' }, { label: 'batch cap', values: h.batch_cap, color: '--c2' }]} />
        </div>
      )}
    </section>
  );
}

function Tables({ now }) {
  const lk = now.cache.lookups;
  const levels = Object.keys(lk);
  const up = now.router.upstream;
  const dec = now.router.decisions;
  return (
    <div class="tables">
      <section>
        <h3>response cache <span class="muted">({now.cache.mode})</span></h3>
        {levels.length ? (
          <table>
            <thead><tr><th>level</th><th>hits</th><th>misses</th><th>hit ratio</th></tr></thead>
            <tbody>
              {levels.map((l) => {
                const hit = lk[l].hit || 0;
                const miss = lk[l].miss || 0;
                return <tr key={l}><td>{l}</td><td>{int(hit)}</td><td>{int(miss)}</td><td>{pct(hit + miss ? hit / (hit + miss) : null)}</td></tr>;
              })}
            </tbody>
          </table>
        ) : <p class="muted">no lookups yet</p>}
      </section>
      <section>
        <h3>router decisions</h3>
        {dec.length ? (
          <table>
            <thead><tr><th>tier</th><th>reason</th><th>model</th><th>count</th></tr></thead>
            <tbody>{dec.map((d) => <tr key={d.tier + d.reason + d.model}><td>{d.tier}</td><td>{d.reason}</td><td>{d.model}</td><td>{int(d.count)}</td></tr>)}</tbody>
          </table>
        ) : <p class="muted">no routed requests yet (one model, or no budget asked)</p>}
        <p>
          upstream:{' '}
          {up ? <><strong>{up.name}</strong> breaker <span class={`chip ${up.state === 'closed' ? 'ok' : up.state === 'open' ? 'bad' : 'warn'}`}>{up.state}</span> {int(up.ok)} ok, {int(up.errors)} failed</> : <span class="muted">none configured</span>}
        </p>
      </section>
    </div>
  );
}

// /stats needs an API key where /metrics does (auth_metrics): asked for here, kept like the
// playground's (sessionStorage), used from the next poll on.
function KeyPrompt() {
  const [key, setKey] = useState(apiKey.get());
  const save = (e) => {
    e.preventDefault();
    apiKey.set(key.trim());
  };
  return (
    <form class="row" onSubmit={save}>
      <input type="password" aria-label="API key" autocomplete="off" placeholder="API key" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      <button type="submit" class="primary">Use key</button>
    </form>
  );
}

export function Live({ stats, history, error, theme }) {
  if (!stats)
    return (
      <div class="muted">
        {error ? <p class="error" role="alert">{error.message}</p> : <p>loading /stats…</p>}
        {error && error.status === 401 && <KeyPrompt />}
      </div>
    );
  const now = stats.now;
  if (!now) return <p class="muted">the server has not taken its first sample yet…</p>;
  const x = history.t;
  const sum = (k) => now.models.reduce((a, m) => a + (m[k] || 0), 0);
  return (
    <div class="live">
      {error && <p class="error" role="alert">{error.message}</p>}
      <section class="box" aria-label="the whole box">
        <div class="tiles">
          <Tile label="server" value={<span class={`chip ${now.status === 'ok' ? 'ok' : 'bad'}`}>{now.status}</span>} sub={stats.device_id} />
          <Tile label="requests/s (box)" value={num(sum('req_s'), 2)} sub={`${now.models.length} model${now.models.length > 1 ? 's' : ''}`} testid="box-req-s" />
          <Tile label="tokens/s (box)" value={num(sum('tok_s'))} testid="box-tok-s" />
          <Tile label="CPU" value={pct(now.cpu_utilization)} sub="of one core" testid="cpu" />
          <Tile label="memory (RSS)" value={bytes(now.rss_bytes)} />
          <Tile label="connections" value={int(now.connections_open)} sub={`${int(now.requests_in_progress)} in progress`} />
          <Tile label="refused for load" value={int(now.refused_total)} tone={now.refused_total > 0 ? 'warn' : ''} />
        </div>
        <Alerts alerts={stats.alerts} />
      </section>
      {now.models.map((m) => <ModelView key={m.name} m={m} h={history.models[m.name]} x={x} theme={theme} />)}
      <div class="charts">
        <Chart title="CPU (cores)" theme={theme} x={x} fmt={(v) => num(v, 2)} series={[{ label: 'CPU', values: history.cpu, color: '--c1' }]} />
        <Chart title="resident memory" theme={theme} x={x} fmt={bytes} series={[{ label: 'RSS', values: history.rss_bytes, color: '--c2' }]} />
      </div>
      <Tables now={now} />
    </div>
  );
}

// edgelm's dashboard: live view, playground and operations in one page (views by URL hash, so
// each is one click or one link away: #live, #playground, #ops).
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Live, StateChip } from './Live.jsx';
import { Ops } from './Ops.jsx';
import { Playground } from './Playground.jsx';
import { useStats } from './stats.js';
import './style.css';

const VIEWS = [
  ['live', 'Live'],
  ['playground', 'Playground'],
  ['ops', 'Operations'],
];
const THEMES = ['auto', 'light', 'dark'];

function viewOfHash() {
  const h = location.hash.replace(/^#\/?/, '');
  return VIEWS.some(([v]) => v === h) ? h : 'live';
}

function systemDark() {
  return window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
}

function useTheme() {
  const [choice, setChoice] = useState(localStorage.getItem('edgelm.theme') || 'auto');
  const [dark, setDark] = useState(systemDark());
  useEffect(() => {
    const mq = window.matchMedia('(prefers-color-scheme: dark)');
    const on = () => setDark(mq.matches);
    mq.addEventListener('change', on);
    return () => mq.removeEventListener('change', on);
  }, []);
  const theme = choice === 'auto' ? (dark ? 'dark' : 'light') : choice;
  // Set while rendering, not in an effect: the charts below read the theme's colours in theirs,
  // which run first.
  document.documentElement.dataset.theme = theme;
  const next = () =>
    setChoice((cur) => {
      const c = THEMES[(THEMES.indexOf(cur) + 1) % THEMES.length];
      localStorage.setItem('edgelm.theme', c);
      return c;
    });
  return { theme, choice, next };
}

function App() {
  const [view, setView] = useState(viewOfHash());
  const { theme, choice, next } = useTheme();
  const { stats, history, error } = useStats();
  useEffect(() => {
    const on = () => setView(viewOfHash());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  const go = (v) => {
    location.hash = v;
    setView(v);
  };
  const onTabKey = (e) => {
    const i = VIEWS.findIndex(([v]) => v === view);
    const d = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
    if (!d) return;
    const v = VIEWS[(i + d + VIEWS.length) % VIEWS.length][0];
    go(v);
    document.getElementById(`tab-${v}`).focus();
  };
  const models = stats && stats.now ? stats.now.models : [];
  const firing = stats ? stats.alerts.filter((a) => a.state === 'firing').length : 0;
  return (
    <>
      <header class="top">
        <h1>
          <img src="/favicon.svg" alt="" width="22" height="22" /> edgelm
        </h1>
        <div class="served" aria-label="served models">
          {models.map((m) => (
            <span key={m.name} class="served-model">
              <span data-testid="header-model">{m.name}</span> <StateChip state={m.state} />
            </span>
          ))}
          {firing > 0 && <a class="chip bad" href="#live">{firing} alert{firing > 1 ? 's' : ''}</a>}
        </div>
        <nav role="tablist" aria-label="views" onKeyDown={onTabKey}>
          {VIEWS.map(([v, label]) => (
            <button key={v} id={`tab-${v}`} role="tab" aria-selected={view === v} tabIndex={view === v ? 0 : -1} aria-controls="view" onClick={() => go(v)} data-testid={`tab-${v}`}>
              {label}
            </button>
          ))}
        </nav>
        <button class="theme" onClick={next} title="light / dark / follow the system" aria-label={`theme: ${choice}`}>
          {choice === 'auto' ? '◐ auto' : choice === 'light' ? '☀ light' : '☾ dark'}
        </button>
      </header>
      <main id="view" role="tabpanel" aria-labelledby={`tab-${view}`}>
        {view === 'live' && <Live stats={stats} history={history} error={error} theme={theme} />}
        {view === 'playground' && <Playground stats={stats} />}
        {view === 'ops' && <Ops />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app'));

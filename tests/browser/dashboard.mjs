// The dashboard in headless Debian chromium (playwright-core), against a running `edgelm serve`:
//   node dashboard.mjs BASE_URL ADMIN_TOKEN MODEL_PATH TOKENIZER_PATH UPLOAD_GGUF SCREENSHOT_DIR KEYED_URL API_KEY HYBRID_URL
//        [VISION_URL IMAGE_PNG]
// (VISION_URL: a server with --mmproj: an image attached by the file picker and one pasted into
// the prompt go with the chat, and the reply shows the image encode time, then "cached".)
// (KEYED_URL: a second server that wants API_KEY on inference: the playground shows its 401 until
// the key is typed, then chats. HYBRID_URL: a third server with a hybrid recurrent model (qwen35):
// after a completion, the live view shows its recurrent-state memory in use / reserved and the
// snapshots, and (it runs with --kv-disk) the KV disk tile's snapshot counters: on disk, read,
// written, skipped; the plain model's view has no such tile.)
// Checks: the page loads with no console error and no failed request; requests sent from here
// move the page's tokens/s and request counters; a playground chat streams text into the page
// (several DOM updates, then the reply's route/cache/TTFT/tokens line), under a JSON schema as
// JSON, and a schema the server refuses shows its 400; no admin call before a token is typed;
// a reload with a wrong token shows the server's 403 message, with the right one the model
// name in the page changes; an upload reloads too; /admin/config shows masked secrets. One screenshot
// per view (live light and dark, playground, operations) under SCREENSHOT_DIR; prints their paths
// and "all checks passed".
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, adminToken, modelPath, tokenizerPath, uploadPath, shots, keyedBase, apiKey, hybridBase, visionBase, imagePng] = process.argv.slice(2);
if (!hybridBase) {
  console.error('usage: node dashboard.mjs BASE_URL ADMIN_TOKEN MODEL_PATH TOKENIZER_PATH UPLOAD_GGUF SCREENSHOT_DIR KEYED_URL API_KEY HYBRID_URL [VISION_URL IMAGE_PNG]');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const t0 = Date.now();
const step = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);
function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const consoleErrors = [];
const failed = [];
const adminCalls = [];
let expectErrors = null; // a phase where the server's 4xx is the point: the message it must show
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // Chromium logs every 4xx fetch; only the wrong-token phase may cause one.
    if (expectErrors && /status of 40[013]/.test(m.text())) return;
    consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => failed.push(`${r.url()}: ${r.failure()?.errorText}`));
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/admin/') || u.pathname === '/reload') adminCalls.push(u.pathname);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !expectErrors) failed.push(`${r.url()}: HTTP ${r.status()}`);
  });

  // 1. The page loads, the live view fills in.
  await page.goto(`${base}/`, { waitUntil: 'load' });
  await page.getByTestId('model-name').first().waitFor({ timeout: 15000 });
  const model = (await page.getByTestId('model-name').first().textContent()).trim();
  step(`live view up, model ${model}`);
  const icon = await page.evaluate(async () => (await fetch('/favicon.ico')).headers.get('content-type'));
  check(icon === 'image/x-icon', `favicon.ico content type ${icon}`);
  const requestsBefore = await page.getByTestId(`requests-${model}`).textContent();

  // 2. Traffic from the test moves the counters: completions for ~4 s, two at a time.
  const until = Date.now() + 4000;
  let sent = 0;
  const worker = async () => {
    while (Date.now() < until) {
      const r = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 48, temperature: 0.8 }),
      });
      check(r.ok, `completion answered ${r.status}`);
      await r.text();
      sent++;
    }
  };
  const load = Promise.all([worker(), worker()]);
  await page.waitForFunction(
    (id) => {
      const t = document.querySelector(`[data-testid="tok-s-${id}"]`);
      return t && parseFloat(t.textContent.replace(/,/g, '')) > 0;
    },
    model,
    { timeout: 10000 },
  );
  const tokS = await page.getByTestId(`tok-s-${model}`).textContent();
  await page.screenshot({ path: join(shots, 'live.png'), fullPage: true });
  await load;
  await page.waitForFunction(
    ([id, before]) => document.querySelector(`[data-testid="requests-${id}"]`).textContent !== before,
    [model, requestsBefore],
    { timeout: 5000 },
  );
  const requestsAfter = await page.getByTestId(`requests-${model}`).textContent();
  check((await page.getByTestId(`state-mem-${model}`).count()) === 0, 'no recurrent-state tile for a model without one');
  step(`sent ${sent} completions: tokens/s showed ${tokS}, requests ${requestsBefore} -> ${requestsAfter}`);
  check(Number(requestsAfter.replace(/,/g, '')) >= Number(requestsBefore.replace(/,/g, '')) + 2, 'the request counter grew');

  // Dark theme, by the toggle (auto -> light -> dark).
  await page.locator('button.theme').click();
  await page.locator('button.theme').click();
  await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark', null, { timeout: 3000 });
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(shots, 'live-dark.png'), fullPage: true });
  await page.locator('button.theme').click(); // back to auto (light here)

  // 3. Playground: Enter sends, the reply streams in.
  await page.getByTestId('tab-playground').click();
  await page.locator('input[type=number]').nth(2).fill('200'); // max_tokens
  await page.locator('input[type=number]').nth(3).fill('7'); // seed
  await page.evaluate(() => {
    window.__updates = [];
    const log = document.querySelector('[data-testid="chat-log"]');
    new MutationObserver(() => {
      const r = log.querySelectorAll('[data-testid="reply"]');
      const last = r[r.length - 1];
      if (last) window.__updates.push(last.textContent.length);
    }).observe(log, { subtree: true, childList: true, characterData: true });
  });
  // stories260K writes 200 tokens faster than a page reads them, so the browser's download
  // is throttled (DevTools network emulation): the SSE bytes then reach the page over about a
  // second, as from a real model, and the text must appear piece by piece.
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 24 * 1024, uploadThroughput: -1 });
  await page.getByTestId('prompt').fill('Once upon a time, a little dog');
  await page.getByTestId('prompt').press('Enter');
  await page.getByTestId('reply-info').waitFor({ timeout: 20000 });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  const reply = (await page.getByTestId('reply').textContent()).trim();
  const lengths = [...new Set(await page.evaluate(() => window.__updates))].filter((n) => n > 1);
  const info = await page.getByTestId('reply-info').textContent();
  step(`playground reply of ${reply.length} chars, ${lengths.length} distinct lengths shown; ${info}`);
  check(reply.length > 20, `the reply has text: "${reply}"`);
  // Streamed: the page read several SSE chunks and showed the text growing (the DOM held at
  // least two partial lengths before the last); a reply in one piece would show one.
  const chunks = Number(await page.getByTestId('reply-info').getAttribute('data-chunks'));
  check(chunks >= 10, `the reply came in ${chunks} SSE chunks`);
  check(lengths.length >= 4, `the reply streamed in (text lengths seen: ${lengths.join(',')})`);
  check(/TTFT\d+ ms/.test(info) && /tokens\/s\d/.test(info), `reply info shows TTFT and tokens/s: ${info}`);
  await page.screenshot({ path: join(shots, 'playground.png'), fullPage: true });

  // A JSON schema: the reply is JSON valid against it; a schema the server refuses shows its 400.
  const schemaBox = page.locator('textarea[placeholder^="{"]');
  await schemaBox.fill('{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}');
  await page.getByTestId('prompt').fill('Tell me a name');
  await page.getByTestId('prompt').press('Enter');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="reply-info"]').length === 2, null, { timeout: 20000 });
  const structured = (await page.getByTestId('reply').nth(1).textContent()).trim();
  let parsed = null;
  try {
    parsed = JSON.parse(structured);
  } catch (_) {
    /* checked below */
  }
  check(parsed && typeof parsed.name === 'string', `the reply under the schema is JSON with a name: ${structured}`);
  step(`schema reply: ${structured.slice(0, 80)}`);
  expectErrors = 'schema';
  await schemaBox.fill('{"type": "no-such-type"}');
  await page.getByTestId('prompt').fill('Again');
  await page.getByTestId('prompt').press('Enter');
  await page.getByTestId('chat-error').waitFor({ timeout: 10000 });
  const schemaError = await page.getByTestId('chat-error').textContent();
  step(`bad schema: ${schemaError}`);
  check(schemaError.startsWith('400: ') && schemaError.length > 10, `the server's 400 is shown: ${schemaError}`);
  expectErrors = null;
  await schemaBox.fill('');

  // 4. Operations: nothing admin is called before a token is typed.
  await page.getByTestId('tab-ops').click();
  await page.getByTestId('reload-path').waitFor();
  check(adminCalls.length === 0, `no admin call before a token: ${adminCalls.join(',')}`);
  check(await page.getByTestId('reload-button').isDisabled(), 'reload is disabled without a token');
  await page.getByTestId('reload-path').fill(modelPath);
  await page.getByTestId('reload-tokenizer').fill(tokenizerPath);
  await page.getByTestId('reload-name').fill('dashboard-reloaded');
  // A wrong token: the server's 403 message is shown.
  expectErrors = 'invalid admin token';
  await page.getByTestId('admin-token').fill(`${adminToken}-wrong`);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.getByTestId('reload-button').click();
  await page.getByTestId('reload-result').waitFor({ timeout: 10000 });
  const wrong = await page.getByTestId('reload-result').textContent();
  step(`wrong token: ${wrong}`);
  check(wrong.includes('403') && wrong.includes('invalid admin token'), `the 403 message is shown: ${wrong}`);
  await page.screenshot({ path: join(shots, 'operations-wrong-token.png'), fullPage: true });
  expectErrors = null;
  // The right one: the model is reloaded under its new name, and the page says so.
  await page.getByTestId('admin-token').fill(adminToken);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.getByTestId('reload-button').click();
  await page.waitForFunction(() => /reloaded: now serving/.test(document.querySelector('[data-testid="reload-result"]')?.textContent || ''), null, { timeout: 30000 });
  await page.waitForFunction(() => document.querySelector('[data-testid="header-model"]')?.textContent === 'dashboard-reloaded', null, { timeout: 10000 });
  step(`reloaded: ${await page.getByTestId('reload-result').textContent()}`);
  // An upload (a GGUF, with progress) reloads too.
  await page.getByTestId('upload-file').setInputFiles(uploadPath);
  await page.getByTestId('upload-name').fill('uploaded-stories');
  await page.getByTestId('upload-button').click();
  await page.waitForFunction(() => /uploaded and reloaded: now serving uploaded-stories/.test(document.querySelector('[data-testid="upload-result"]')?.textContent || ''), null, { timeout: 30000 });
  await page.waitForFunction(() => document.querySelector('[data-testid="header-model"]')?.textContent === 'uploaded-stories', null, { timeout: 10000 });
  step(`uploaded: ${await page.getByTestId('upload-result').textContent()}`);
  await page.getByTestId('config-button').click();
  await page.getByTestId('config').waitFor({ timeout: 10000 });
  const config = await page.getByTestId('config').textContent();
  check(config.includes('"admin_token": "****"') && !config.includes(adminToken), 'the config masks the admin token');
  await page.screenshot({ path: join(shots, 'operations.png'), fullPage: true });
  const stored = await page.evaluate(() => [sessionStorage.getItem('edgelm.admin'), localStorage.getItem('edgelm.admin')]);
  check(stored[0] === adminToken && stored[1] === null, 'the token is in sessionStorage only');

  // The live view shows the new name too.
  await page.getByTestId('tab-live').click();
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="model-name"]')].some((e) => e.textContent === 'uploaded-stories'), null, { timeout: 10000 });

  // 5. A server with API keys: the page loads, /v1/models and chats need the key.
  const keyed = await context.newPage();
  keyed.on('console', (m) => {
    if (m.type() === 'error' && !(expectErrors && /status of 401/.test(m.text()))) consoleErrors.push(`keyed: ${m.text()}`);
  });
  keyed.on('pageerror', (e) => consoleErrors.push(`keyed page error: ${e.message}`));
  await keyed.goto(`${keyedBase}/#playground`, { waitUntil: 'load' });
  await keyed.getByTestId('prompt').waitFor();
  await keyed.waitForFunction(() => /required here/.test(document.querySelector('.params')?.textContent || ''), null, { timeout: 10000 });
  expectErrors = 'missing API key';
  await keyed.getByTestId('prompt').fill('Once upon a time');
  await keyed.getByTestId('prompt').press('Enter');
  await keyed.getByTestId('chat-error').waitFor({ timeout: 10000 });
  const keyError = await keyed.getByTestId('chat-error').textContent();
  step(`without the key: ${keyError}`);
  check(keyError.startsWith('401: ') && /API key/.test(keyError), `the 401 is shown: ${keyError}`);
  expectErrors = null;
  await keyed.locator('input[type=password]').fill(apiKey);
  await keyed.getByTestId('prompt').fill('Once upon a time');
  await keyed.getByTestId('prompt').press('Enter');
  await keyed.getByTestId('reply-info').waitFor({ timeout: 20000 });
  const keyedReply = (await keyed.getByTestId('reply').last().textContent()).trim();
  check(keyedReply.length > 10, `a reply with the key: ${keyedReply}`);
  check((await keyed.locator('select option').count()) >= 2, 'the model list loaded with the key');
  step(`with the key: ${keyedReply.length} chars`);
  await keyed.close();

  // 6. The hybrid model's live view: its recurrent-state memory once a request ran.
  const hybrid = await context.newPage();
  hybrid.on('console', (m) => m.type() === 'error' && consoleErrors.push(`hybrid: ${m.text()}`));
  hybrid.on('pageerror', (e) => consoleErrors.push(`hybrid page error: ${e.message}`));
  const hr = await fetch(`${hybridBase}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time there was a little girl who liked to play in the park', max_tokens: 8 }),
  });
  check(hr.ok, `hybrid completion answered ${hr.status}`);
  await hr.text();
  await hybrid.goto(`${hybridBase}/`, { waitUntil: 'load' });
  await hybrid.getByTestId('model-name').first().waitFor({ timeout: 15000 });
  const hybridModel = (await hybrid.getByTestId('model-name').first().textContent()).trim();
  const tile = hybrid.getByTestId(`state-mem-${hybridModel}`).locator('xpath=..');
  await tile.waitFor({ timeout: 15000 });
  // Once a sample after the request is shown: none in use.
  await hybrid.waitForFunction(
    (id) => /^0 B \//.test(document.querySelector(`[data-testid="state-mem-${id}"]`).textContent.trim()),
    hybridModel,
    { timeout: 10000 },
  );
  const tileText = (await tile.textContent()).trim();
  step(`hybrid model ${hybridModel}: ${tileText}`);
  check(/recurrent state in use \/ reserved/.test(tileText), `the tile's label: ${tileText}`);
  check(/0 B \/ [0-9.]+ (B|KiB|MiB)/.test(tileText) && !/\/ 0 B/.test(tileText), `idle: none in use, some reserved: ${tileText}`);
  check(/snapshots [0-9.]+ (KiB|MiB)/.test(tileText), `snapshot bytes shown: ${tileText}`);
  // Its KV disk tier (--kv-disk): the tile shows the recurrent-state snapshots on disk, once the
  // writer thread has written the request's (one per block at interval 1).
  // On a timeout, say what the server's /stats held, so that a failure tells a slow writer (its
  // counters still 0) from a page that does not show them.
  await hybrid
    .waitForFunction(
      (id) => {
        const e = document.querySelector(`[data-testid="kv-disk-snapshots-${id}"]`);
        return e && /snapshots: [1-9][0-9]* on disk · \d+ read · [1-9][0-9]* written · \d+ skipped/.test(e.textContent);
      },
      hybridModel,
      { timeout: 30000 },
    )
    .catch(async (e) => {
      const stats = await (await fetch(`${hybridBase}/stats`)).json();
      const shown = await hybrid.getByTestId(`kv-disk-${hybridModel}`).textContent().catch(() => '(no tile)');
      throw new Error(`${e.message}\n/stats kv_disk: ${JSON.stringify(stats.now.models.map((m) => m.kv_disk))}\ntile: ${shown}`);
    });
  const snapText = (await hybrid.getByTestId(`kv-disk-snapshots-${hybridModel}`).textContent()).trim();
  step(`hybrid model's disk tier: ${snapText}`);
  check(/ 0 skipped$/.test(snapText), `no snapshot skipped: ${snapText}`);
  await hybrid.screenshot({ path: join(shots, 'live-hybrid.png'), fullPage: true });
  await hybrid.close();

  // 7. Images (a server with --mmproj): attach by the file picker, then by pasting.
  if (visionBase) {
    const vision = await context.newPage();
    vision.on('console', (m) => m.type() === 'error' && consoleErrors.push(`vision: ${m.text()}`));
    vision.on('pageerror', (e) => consoleErrors.push(`vision page error: ${e.message}`));
    await vision.goto(`${visionBase}/#playground`, { waitUntil: 'load' });
    await vision.getByTestId('prompt').waitFor();
    await vision.locator('input[type=number]').nth(2).fill('4'); // max_tokens
    await vision.getByTestId('image-picker').setInputFiles(imagePng);
    await vision.locator('[data-testid="attachments"] img').waitFor({ timeout: 5000 });
    await vision.getByTestId('prompt').fill('What is in this picture?');
    await vision.getByTestId('prompt').press('Enter');
    await vision.getByTestId('reply-info').waitFor({ timeout: 20000 });
    const first = await vision.getByTestId('image-encode').textContent();
    step(`picked image: ${first}`);
    check(/image encode[\d.,]+ ms/.test(first), `the reply shows the encode time: ${first}`);
    check((await vision.locator('.msg.user .thumbs img').count()) === 1, 'the sent message shows its image');
    check((await vision.locator('[data-testid="attachments"]').count()) === 0, 'the attachments cleared on send');
    // Paste the same PNG into the prompt: attached again; the server's encoder cache answers.
    const b64 = (await import('node:fs')).readFileSync(imagePng).toString('base64');
    await vision.evaluate((data) => {
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
      const box = document.querySelector('[data-testid="prompt"]');
      box.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    }, b64);
    await vision.locator('[data-testid="attachments"] img').waitFor({ timeout: 5000 });
    await vision.getByTestId('prompt').fill('And now?');
    await vision.getByTestId('prompt').press('Enter');
    await vision.waitForFunction(() => document.querySelectorAll('[data-testid="reply-info"]').length === 2, null, { timeout: 20000 });
    const second = await vision.getByTestId('image-encode').last().textContent();
    step(`pasted image: ${second}`);
    check(/cached/.test(second), `the same image again comes from the encoder cache: ${second}`);
    check((await vision.locator('.msg.user .thumbs img').count()) === 2, 'both sent messages show their image');
    await vision.screenshot({ path: join(shots, 'playground-image.png'), fullPage: true });
    await vision.close();
  }

  check(consoleErrors.length === 0, `no console errors: ${consoleErrors.join(' | ')}`);
  check(failed.length === 0, `no failed requests: ${failed.join(' | ')}`);
  for (const f of ['live.png', 'live-dark.png', 'playground.png', 'operations-wrong-token.png', 'operations.png', 'live-hybrid.png', ...(visionBase ? ['playground-image.png'] : [])])
    console.log(`screenshot: ${join(shots, f)}`);
  step('all checks passed');
} finally {
  await browser.close();
}

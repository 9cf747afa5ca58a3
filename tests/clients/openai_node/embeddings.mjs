// /v1/embeddings through the official OpenAI Node client (openai@4, pinned in package.json) and
// /v1/rerank over plain fetch, against a running `edgelm serve -m EMBEDDING_MODEL`. The expected
// vectors and scores come from the test (tests/server/test_openai_node_embeddings.cpp), computed
// with the model's TextEncoder directly.
// Usage: node embeddings.mjs BASE_URL API_KEY EXPECTED_JSON. Prints one line per check; exits 1 if
// any check fails.
//
// EXPECTED_JSON: {"model", "n_embd", "texts": [...] (empty: a reranker, only the rerank check),
// "token_ids": [[ids of each text]], "vectors": [[unit vector of each text]],
// "truncations": [{"dimensions", "vectors"}], "refused_dimensions": [...],
// "rerank": {"query", "documents", "scores"?: [...], "refused"?: true}}.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [baseURL, apiKey, expectedPath] = process.argv.slice(2);
const want = JSON.parse(readFileSync(expectedPath, 'utf8'));
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
const model = want.model;

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function close(got, expected, what) {
  assert(got.length === expected.length, `${what}: ${got.length} values, want ${expected.length}`);
  for (let i = 0; i < got.length; i++)
    assert(Math.abs(got[i] - expected[i]) < 1e-5, `${what}[${i}] = ${got[i]}, want ${expected[i]}`);
}
function fromBase64(s) {
  const buf = Buffer.from(s, 'base64');
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  const out = [];
  for (let i = 0; i < buf.length; i += 4) out.push(view.getFloat32(i, true)); // little-endian float32
  return out;
}

let floats = null;
if (want.texts.length > 0) {
  await check('embeddings.create float: the right vectors, in order, with usage', async () => {
    const r = await client.embeddings.create({ model, input: want.texts, encoding_format: 'float' });
    assert(r.object === 'list' && r.model === model, `object ${r.object}, model ${r.model}`);
    assert(r.data.length === want.texts.length, `${r.data.length} embeddings`);
    r.data.forEach((d, i) => {
      assert(d.index === i && d.object === 'embedding', `data[${i}]: index ${d.index}`);
      close(d.embedding, want.vectors[i], `float vector ${i}`);
    });
    assert(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens, JSON.stringify(r.usage));
    floats = r.data.map((d) => d.embedding);
  });

  await check("embeddings.create with the client's default (it asks for base64 and decodes it)", async () => {
    const r = await client.embeddings.create({ model, input: want.texts });
    r.data.forEach((d, i) => {
      assert(Array.isArray(d.embedding), `data[${i}] was not decoded into numbers`);
      close(d.embedding, want.vectors[i], `default vector ${i}`);
      if (floats) d.embedding.forEach((x, k) => assert(x === floats[i][k], `default ${i}[${k}] ${x} != float ${floats[i][k]}`));
    });
  });

  await check('embeddings.create encoding_format base64: little-endian float32 of the same values', async () => {
    const r = await client.embeddings.create({ model, input: want.texts, encoding_format: 'base64' });
    r.data.forEach((d, i) => {
      assert(typeof d.embedding === 'string', `data[${i}] is not a base64 string`);
      const v = fromBase64(d.embedding);
      close(v, want.vectors[i], `base64 vector ${i}`);
      if (floats) v.forEach((x, k) => assert(x === floats[i][k], `base64 ${i}[${k}] ${x} != float ${floats[i][k]}`));
    });
  });

  await check('embeddings.create dimensions = n_embd and the Matryoshka truncations', async () => {
    const full = await client.embeddings.create({ model, input: want.texts, dimensions: want.n_embd });
    full.data.forEach((d, i) => close(d.embedding, want.vectors[i], `dimensions ${want.n_embd} vector ${i}`));
    for (const t of want.truncations) {
      for (const format of ['float', 'base64']) {
        const r = await client.embeddings.create({ model, input: want.texts, dimensions: t.dimensions, encoding_format: format });
        r.data.forEach((d, i) =>
          close(format === 'base64' ? fromBase64(d.embedding) : d.embedding, t.vectors[i], `dimensions ${t.dimensions} ${format} ${i}`));
      }
    }
  });

  await check('embeddings.create with a dimensions the model cannot give: 400 naming it', async () => {
    for (const dimensions of want.refused_dimensions) {
      let err = null;
      try {
        await client.embeddings.create({ model, input: 'hello', dimensions });
      } catch (e) {
        err = e;
      }
      assert(err instanceof OpenAI.BadRequestError, `dimensions ${dimensions}: no 400 (${err})`);
      assert(err.param === 'dimensions', `param ${err.param}`);
    }
  });

  await check('embeddings.create with token id arrays: the same vectors as the texts', async () => {
    const r = await client.embeddings.create({ model, input: want.token_ids });
    assert(r.data.length === want.token_ids.length, `${r.data.length} embeddings`);
    r.data.forEach((d, i) => close(d.embedding, want.vectors[i], `token-id vector ${i}`));
  });
}

await check('rerank over fetch: sorted results (or the 400 of a model without a head)', async () => {
  const rr = want.rerank;
  const res = await fetch(`${baseURL}/v1/rerank`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, query: rr.query, documents: rr.documents, top_n: rr.documents.length, return_documents: true }),
  });
  const body = await res.json();
  if (rr.refused) {
    assert(res.status === 400, `status ${res.status}: ${JSON.stringify(body)}`);
    assert(body.error.param === 'model' && /cannot rerank/.test(body.error.message), JSON.stringify(body));
    return;
  }
  assert(res.status === 200, `status ${res.status}: ${JSON.stringify(body)}`);
  assert(body.results.length === rr.documents.length, `${body.results.length} results`);
  const order = rr.scores.map((s, i) => i).sort((a, b) => rr.scores[b] - rr.scores[a] || a - b);
  body.results.forEach((x, k) => {
    assert(x.index === order[k], `result ${k}: index ${x.index}, want ${order[k]}`);
    assert(Math.abs(x.relevance_score - rr.scores[x.index]) < 1e-4, `score ${x.relevance_score} want ${rr.scores[x.index]}`);
    assert(x.document.text === rr.documents[x.index], `document ${k}`);
    if (k > 0) assert(x.relevance_score <= body.results[k - 1].relevance_score, 'not sorted');
  });
});

console.log(failures === 0 ? 'all checks passed' : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);

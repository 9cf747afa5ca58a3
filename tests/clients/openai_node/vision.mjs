// Images through the official OpenAI Node client (openai@4 + zod@3, pinned in package.json)
// against a running `edgelm serve --mmproj` on a synthetic Gemma 3 with a synthetic encoder: a
// data-URI image with a json_schema inspection verdict parses (non-streamed and streamed); the
// same request again reuses the prefix KV; another image with the same text does not.
// Usage: node vision.mjs BASE_URL MODEL RED_PNG_BASE64 BLUE_PNG_BASE64. Prints one line per
// check; exits 1 if any check fails.
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const [baseURL, model, red, blue] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });

const Inspection = z.object({
  verdict: z.enum(['pass', 'fail']),
  defects: z.array(z.object({ code: z.string().min(1).max(8) })).max(2),
});

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

const messages = (b64) => [
  {
    role: 'user',
    content: [
      { type: 'text', text: 'Inspect this part. Answer with a verdict.' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } },
    ],
  },
];

let cachedFirst = -1;
await check('image + json_schema parses', async () => {
  const r = await client.beta.chat.completions.parse({
    model,
    messages: messages(red),
    response_format: zodResponseFormat(Inspection, 'inspection'),
    temperature: 0,
    max_tokens: 96,
  });
  const p = r.choices[0].message.parsed;
  assert(p && (p.verdict === 'pass' || p.verdict === 'fail'), `parsed: ${JSON.stringify(p)}`);
});

await check('the same image again is a prefix-cache hit', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: messages(red),
    response_format: zodResponseFormat(Inspection, 'inspection'),
    temperature: 0,
    max_tokens: 96,
  });
  cachedFirst = r.usage.prompt_tokens_details.cached_tokens;
  assert(cachedFirst > 0, `cached_tokens ${cachedFirst}`);
  Inspection.parse(JSON.parse(r.choices[0].message.content));
});

await check('another image with the same text misses', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: messages(blue),
    response_format: zodResponseFormat(Inspection, 'inspection'),
    temperature: 0,
    max_tokens: 96,
  });
  const c = r.usage.prompt_tokens_details.cached_tokens;
  assert(c < cachedFirst, `cached_tokens ${c} vs ${cachedFirst} for the same image`);
  Inspection.parse(JSON.parse(r.choices[0].message.content));
});

await check('streamed image + json_schema parses', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: messages(blue),
    response_format: zodResponseFormat(Inspection, 'inspection'),
    temperature: 0,
    max_tokens: 96,
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  Inspection.parse(JSON.parse(text));
});

await check('a bad image is a 400 naming the part', async () => {
  try {
    await client.chat.completions.create({ model, messages: messages('@@@'), max_tokens: 4 });
    throw new Error('no error');
  } catch (e) {
    assert(e.status === 400, `status ${e.status}`);
    assert(String(e.message).includes('messages[0].content[1]'), e.message);
  }
});

if (failures > 0) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');

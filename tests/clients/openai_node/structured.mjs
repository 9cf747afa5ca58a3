// Structured output and tool calling through the official OpenAI Node client (openai@4 + zod@3,
// pinned in package.json, installed by scripts/setup.sh) against a running `edgelm serve` on
// stories260K, a 260K-parameter model that cannot write JSON by itself: only the constraint makes
// these hold. Usage: node structured.mjs BASE_URL API_KEY. Prints one line per check; exits 1 if
// any check fails.
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
const model = 'cloud-stories';

const Joint = z.enum(['base', 'shoulder', 'elbow', 'wrist']);
const ArmCommand = z.object({
  joint: Joint,
  angle_deg: z.number().int().min(-180).max(180),
  note: z.string().max(16).nullable(),
});
const Inspection = z.object({
  verdict: z.enum(['pass', 'fail']),
  defects: z.array(z.object({ code: z.string().min(1).max(8), x: z.number().int(), y: z.number().int() })).max(2),
});
const Lookup = z.object({ part: z.string().max(12) });

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
const ask = [{ role: 'user', content: 'Move the wrist to 30 degrees.' }];

await check('parse json_schema (greedy)', async () => {
  const r = await client.beta.chat.completions.parse({
    model, messages: ask, temperature: 0, max_tokens: 200,
    response_format: zodResponseFormat(ArmCommand, 'arm_command'),
  });
  const m = r.choices[0].message;
  assert(r.choices[0].finish_reason === 'stop', `finish_reason ${r.choices[0].finish_reason}`);
  assert(ArmCommand.safeParse(m.parsed).success, `does not validate: ${m.content}`);
});

for (const seed of [1, 2, 3, 4, 5]) {
  await check(`parse json_schema (T=1, seed ${seed})`, async () => {
    const r = await client.beta.chat.completions.parse({
      model, messages: ask, temperature: 1, seed, max_tokens: 250,
      response_format: zodResponseFormat(Inspection, 'inspection'),
    });
    const m = r.choices[0].message;
    assert(r.choices[0].finish_reason === 'stop', `finish_reason ${r.choices[0].finish_reason}: ${m.content}`);
    assert(Inspection.safeParse(m.parsed).success, `does not validate: ${m.content}`);
  });
}

await check('json_object', async () => {
  const r = await client.chat.completions.create({
    model, messages: ask, temperature: 1, seed: 7, max_tokens: 120, response_format: { type: 'json_object' },
  });
  const c = r.choices[0];
  assert(c.finish_reason === 'stop', `finish_reason ${c.finish_reason}: ${c.message.content}`);
  const v = JSON.parse(c.message.content);
  assert(v !== null && typeof v === 'object' && !Array.isArray(v), `not an object: ${c.message.content}`);
});

const tools = [
  zodFunction({ name: 'move_arm', parameters: ArmCommand, description: 'Move one joint of the arm' }),
  zodFunction({ name: 'lookup_part', parameters: Lookup }),  // no description
];

await check('forced tool call (named)', async () => {
  const r = await client.beta.chat.completions.parse({
    model, messages: ask, temperature: 1, seed: 11, max_tokens: 200, tools,
    tool_choice: { type: 'function', function: { name: 'move_arm' } },
  });
  const c = r.choices[0];
  assert(c.finish_reason === 'tool_calls', `finish_reason ${c.finish_reason}`);
  const call = c.message.tool_calls[0];
  assert(call.type === 'function' && call.function.name === 'move_arm', `call ${JSON.stringify(call)}`);
  assert(typeof call.id === 'string' && call.id.length > 0, 'no call id');
  assert(ArmCommand.safeParse(call.function.parsed_arguments).success, `arguments ${call.function.arguments}`);
});

await check('required tool call, streamed', async () => {
  const stream = await client.chat.completions.create({
    model, messages: ask, temperature: 1, seed: 5, max_tokens: 250, tools, tool_choice: 'required',
    parallel_tool_calls: false, stream: true,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    for (const d of ch.delta?.tool_calls ?? []) {
      assert(Number.isInteger(d.index), 'fragment without index');
      if (!calls[d.index]) {
        assert(d.id && d.type === 'function' && d.function?.name, `first fragment ${JSON.stringify(d)}`);
        calls[d.index] = { name: d.function.name, arguments: '' };
      }
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
  }
  assert(finish === 'tool_calls', `finish_reason ${finish}`);
  assert(calls.length === 1, `${calls.length} calls with parallel_tool_calls false`);
  const schema = { move_arm: ArmCommand, lookup_part: Lookup }[calls[0].name];
  assert(schema, `unknown tool ${calls[0].name}`);
  assert(schema.safeParse(JSON.parse(calls[0].arguments)).success, `arguments ${calls[0].arguments}`);
});

await check('conversation with tool results', async () => {
  const r = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 40, tools,
    messages: [
      ...ask,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'move_arm', arguments: '{"joint":"wrist","angle_deg":30,"note":null}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"ok":true}' },
    ],
  });
  const m = r.choices[0].message;
  assert(m.role === 'assistant', `role ${m.role}`);
  assert(typeof m.content === 'string' || Array.isArray(m.tool_calls), 'neither content nor tool calls');
});

await check('bad schema is a 400 naming the keyword', async () => {
  try {
    await client.chat.completions.create({
      model, messages: ask, max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: {
        type: 'object', patternProperties: { '^x': { type: 'string' } } } } },
    });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof OpenAI.APIError && e.status === 400, `got ${e}`);
    assert(String(e.message).includes('patternProperties'), `message ${e.message}`);
  }
});

if (failures > 0) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');

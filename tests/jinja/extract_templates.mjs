// Prints the `gguf:` Jinja chat templates of @huggingface/ollama-utils' src/chat-template-automap.ts
// as JSON [{"model": ..., "source": ...}, ...] (edgelm's Jinja oracle tests read them at test
// time; the templates themselves are never committed).
// Usage: node extract_templates.mjs <path to chat-template-automap.ts>
import { readFileSync } from "node:fs";
import vm from "node:vm";

const ts = readFileSync(process.argv[2], "utf8");
// The file is one array literal of plain objects: drop the type import and annotation.
const js = ts
  .replace(/^import type .*$/m, "")
  .replace(/export const OLLAMA_CHAT_TEMPLATE_MAPPING\s*:\s*[A-Za-z]+\[\]\s*=/, "result =");
const sandbox = { result: null };
vm.runInNewContext(js, sandbox);
const out = sandbox.result.map((e) => ({ model: e.model, source: e.gguf }));
process.stdout.write(JSON.stringify(out));

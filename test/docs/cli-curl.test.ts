/**
 * The curl examples of docs/cli.md ("Asking the service over HTTP"), run against a real
 * service started as `npm start` starts it (examples/envoy, examples/policies.yaml, the
 * memory store), in the order the page shows them. Each `sh` block holding one curl
 * command is followed by an `http` block with the answer: its status line and headers
 * must be what the service sends, and its body (pretty-printed in the doc) must be the
 * same JSON. The commands run in the real curl when it is installed, else as the same
 * request through fetch.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startExampleService } from '../support/loopback-service.js';

const root = join(import.meta.dirname, '../..');
const doc = readFileSync(join(root, 'docs/cli.md'), 'utf8');

interface Example {
  readonly command: string;
  readonly answer: string;
}

/** Every `sh` block that is one curl command, with the `http` block right after it. */
function examples(markdown: string): Example[] {
  const out: Example[] = [];
  const re = /```sh\n(curl [^\n]*)\n```\s*```http\n([^]*?)\n```/g;
  for (const m of markdown.matchAll(re)) out.push({ command: m[1]!, answer: m[2]! });
  return out;
}

/** Splits a one-line shell command into words: single and double quotes, no expansion. */
function words(command: string): string[] {
  const out: string[] = [];
  let word: string | undefined;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (quote === '"' && c === '\\') word += command[++i]!;
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === ' ') {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else word = (word ?? '') + c;
  }
  if (quote !== undefined) throw new Error(`unclosed quote in: ${command}`);
  if (word !== undefined) out.push(word);
  return out;
}

interface Answer {
  readonly statusLine: string;
  readonly headers: ReadonlyMap<string, string>;
  readonly body: string;
}

function parseAnswer(text: string): Answer {
  const [head, ...rest] = text.replace(/\r\n/g, '\n').split('\n\n');
  const [statusLine, ...lines] = head!.split('\n');
  const headers = new Map<string, string>();
  for (const line of lines) {
    const at = line.indexOf(':');
    headers.set(line.slice(0, at).trim().toLowerCase(), line.slice(at + 1).trim());
  }
  return { statusLine: statusLine!, headers, body: rest.join('\n\n') };
}

const hasCurl = spawnSync('curl', ['--version']).status === 0;

/** Runs `args` (curl's, without `curl`) in curl, or as the same request through fetch. */
async function run(args: string[]): Promise<Answer> {
  if (hasCurl) {
    const { stdout } = await promisify(execFile)('curl', ['-sS', ...args]);
    return parseAnswer(stdout);
  }
  let url: string | undefined;
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-d') body = args[++i];
    else if (a === '-H') {
      const [k, ...v] = args[++i]!.split(':');
      headers[k!.trim()] = v.join(':').trim();
    } else if (a !== '-i') url = a.includes('://') ? a : `http://${a}`;
  }
  const r = await fetch(url!, {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    ...(body === undefined ? {} : { body }),
  });
  return {
    statusLine: `HTTP/1.1 ${r.status} ${r.statusText}`,
    headers: new Map([...r.headers].map(([k, v]) => [k.toLowerCase(), v])),
    body: await r.text(),
  };
}

let svc: RunningService;

beforeAll(async () => {
  // The clock stands 20 s into a minute, as the page says, and still between the examples.
  svc = await startExampleService();
});
afterAll(async () => {
  await svc?.shutdown();
});

describe(`docs/cli.md curl examples (${hasCurl ? 'curl' : 'fetch'})`, () => {
  it('answer as documented, in order', async () => {
    const all = examples(doc);
    expect(all.length).toBeGreaterThanOrEqual(5);
    expect(all.some((e) => e.command.includes('/json'))).toBe(true);
    expect(all.some((e) => e.command.includes('/v1/check'))).toBe(true);
    for (const { command, answer } of all) {
      const args = words(command).slice(1);
      // the page's address, as `npm start` serves it; the test's service has its own port
      expect(
        args.some((a) => a.startsWith('localhost:8080/')),
        command,
      ).toBe(true);
      const got = await run(
        args.map((a) => a.replace(/^localhost:8080/, `127.0.0.1:${svc.httpPort}`)),
      );
      const want = parseAnswer(answer);
      expect(got.statusLine, command).toBe(want.statusLine);
      for (const [name, value] of want.headers)
        expect(got.headers.get(name), `${command}: ${name}`).toBe(value);
      expect(JSON.parse(got.body), command).toEqual(JSON.parse(want.body));
    }
  });
});

// The DSL's source lines under plain Node: read from V8 call sites and the
// module's source map (the fast path, taken when Node's own stack formatter is
// installed) they must be the lines Node's source-mapped stack text gives (the
// path taken under any other formatter, e.g. this test runner's). Runs the
// built package (dist/) in a child `node`, once per path, and compares.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';

const script = (slow: boolean) => `
const { importDsl } = await import('./dist/compiler/import/dsl.js');
${slow ? 'const node = Error.prepareStackTrace; Error.prepareStackTrace = function other(e, s) { return node(e, s); };' : ''}
const out = [];
for (const [file, preset] of [['models/gpt.ts', 'tiny'], ['models/llama.ts', 'tiny'], ['models/bert.ts', undefined], ['models/mlp.ts', undefined]]) {
  const { graph } = await importDsl(file, { preset });
  out.push(graph.ops.map((o) => o.loc.file + ':' + o.loc.line + ':' + o.loc.col).join(' '));
}
console.log(JSON.stringify(out));
`;

const run = (slow: boolean) => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script(slow)], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as string[];
};

describe('DSL source lines', () => {
  it('are the same from call sites as from the source-mapped stack text', () => {
    const fast = run(false), slow = run(true);
    expect(fast.length).toBe(4);
    for (const ops of fast) expect(ops).not.toMatch(/:0:0/);
    expect(fast).toEqual(slow);
  });
});

// Shared helpers of the command-line tests: run bin/tiercut.js, and check that
// a user error is one line on stderr, "tiercut: ...", exit code 2, no stack trace.
import { expect } from 'vitest';
import { spawnSync } from 'node:child_process';

export const cli = (...args: string[]) => spawnSync(process.execPath, ['bin/tiercut.js', ...args], { encoding: 'utf8', timeout: 60_000 });

export function expectUserError(r: ReturnType<typeof cli>, pattern: RegExp): void {
  expect(r.status, r.stderr + r.stdout).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(lines.length, r.stderr).toBe(1);
  expect(lines[0]).toMatch(/^tiercut: /);
  expect(lines[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
}

/** A DSL model whose matmul disagrees on the inner dimension, on line 6. */
export const SHAPE_ERROR_MODEL = [
  "import type { Model, PresetBase } from 'tiercut/dsl';",
  'const m: Model<PresetBase> = {',
  '  presets: { a: { batch: 2, seq: 1 } },',
  '  build(nn, cfg) {',
  "    const x = nn.input('x', [cfg.batch, 4]);",
  "    const h = nn.matmul(x, nn.param('w', [5, 3]));",
  "    return nn.crossEntropy(h, nn.input('y', [cfg.batch], 'i32'));",
  '  },',
  '};',
  'export default m;',
].join('\n');

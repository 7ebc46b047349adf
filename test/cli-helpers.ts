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

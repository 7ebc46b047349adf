// Scratch directories for a test file: made under the system's temp
// directory, removed with everything in them when the file's tests end
// (importing this module registers that one afterAll hook for the importing
// file). A run of the suite had left ~20 such directories behind in /tmp.
import { afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new empty directory named PREFIX + random suffix, removed after this file's tests. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of made.splice(0)) {
    try { rmSync(dir, { recursive: true, force: true }); } catch (e) { console.warn(`scratch directory ${dir} not removed: ${(e as Error).message}`); }
  }
});

// The suite's one setup in vitest's main process: a directory for the plans
// test files share (test/compiled-once.ts), made before any file runs and
// removed with its contents when the run ends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext { compiledPlansDir: string }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'tiercut-plans-'));
  project.provide('compiledPlansDir', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}

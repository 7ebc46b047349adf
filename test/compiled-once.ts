// One compile of a model for the whole run of the suite. Several test files
// assert on the same plan (gpt3-13b on an H200 by default: six files, ~25 s
// of compile each); the first to ask compiles it and writes the plan file
// under the run's directory (test/global-setup.ts), the others wait for it and
// read it back as `tiercut run` reads a plan (parsePlan: the schema and the
// verifier). The run's directory is new each run, so no plan outlives the
// code that made it. A compile that throws is rethrown in the asking file
// only; a file that finds no plan after WAIT_MS compiles its own.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import { parsePlan, serializePlan } from '../compiler/plan/io.js';
import type { Plan } from '../compiler/plan/types.js';
import { compile, type CompileOptions } from '../src/compile.js';

const WAIT_MS = 600_000;

/** The same object, its keys sorted at every level: one key for options written in any order. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])]));
}

export async function compiledOnce(opts: CompileOptions): Promise<Plan> {
  const key = createHash('sha256').update(JSON.stringify(canonical(opts))).digest('hex').slice(0, 16);
  const dir = inject('compiledPlansDir');
  const file = join(dir, `${key}.plan.json`), failed = join(dir, `${key}.failed`), lock = join(dir, `${key}.lock`);
  let owner = true;
  try { mkdirSync(lock); } catch { owner = false; }
  if (owner) {
    try {
      const plan = await compile(opts);
      writeFileSync(`${file}.tmp`, serializePlan(plan));
      renameSync(`${file}.tmp`, file);
      return plan;
    } catch (e) {
      writeFileSync(failed, String(e));
      throw e;
    }
  }
  for (const end = Date.now() + WAIT_MS; Date.now() < end && !existsSync(failed); await new Promise((r) => setTimeout(r, 250)))
    if (existsSync(file)) return parsePlan(readFileSync(file, 'utf8'), file);
  return compile(opts); // (its owner failed or is still compiling: this file's own compile, its own error)
}

#!/usr/bin/env node
// npm start: the main job. Compiles the tiny GPT for this machine with an
// emulated GPU too small for the whole model state (so the optimizer state
// must leave it), prints the partition report, and trains 30 steps on
// synthetic token data.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../dist/src/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tiercut-main-'));
const plan = join(dir, 'gpt-tiny.plan.json');
const steps = [
  ['compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', 'local', '--gpu-mem', '400KB', '--lr', '3e-3', '-o', plan],
  ['report', plan],
  ['run', plan, '--steps', '30', '--seed', '1'],
];
let code = 0;
try {
  for (const argv of steps) {
    process.stdout.write(`\n$ tiercut ${argv.join(' ')}\n`);
    code = await main(argv);
    if (code !== 0) break;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = code;

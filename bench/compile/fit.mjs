#!/usr/bin/env node
// node bench/compile/fit.mjs [ROOT] [CASE] — one `fit` in this fresh process
// from the build in ROOT (default: this checkout; another build, e.g. a git
// worktree of an older commit with node_modules linked, to compare in
// interleaved runs). CASE: 'zero-offload' (default; gpt on v100-32g, no NVMe,
// parameters kept on the GPU: the paper's 13B), 'a100' (gpt on a100-80g with
// 32 GB CPU and 128 GB NVMe: capacity.test.ts's) or 'bert' (bert on 2 MB of a
// V100: deepened to the ops limit). Prints wall seconds, the models tried
// (probes among them), the answer and its predicted step. Run with
// TIERCUT_LP_CACHE=0, or TMPDIR set to an empty directory, for a cold fit.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const cases = {
  'zero-offload': { model: 'models/gpt.ts', hw: 'v100-32g', nvmeBytes: 0, precision: 'fp16', keepParamsOnGpu: true },
  a100: { model: 'models/gpt.ts', hw: 'a100-80g', cpuMemBytes: 32e9, nvmeBytes: 128e9, precision: 'fp16' },
  bert: { model: 'models/bert.ts', hw: 'v100-32g', gpuMemBytes: 2e6, cpuMemBytes: 1e9, precision: 'fp16' },
};
const root = resolve(process.argv[2] ?? fileURLToPath(new URL('../..', import.meta.url)));
const which = process.argv[3] ?? 'zero-offload';
if (!cases[which]) throw new Error(`fit.mjs: CASE must be one of ${Object.keys(cases).join(', ')}, got ${which}`);
process.chdir(root);
const t0 = performance.now();
const { fit } = await import(`${root}/dist/src/fit.js`);
const r = await fit(cases[which]);
const wall = (performance.now() - t0) / 1e3;
console.log(`${root} ${which}: wall ${wall.toFixed(1)} s, ${r.tried.length} tried (${r.tried.filter((t) => t.probe).length} probes), answer ${r.model?.preset} ${JSON.stringify(r.model?.overrides)} ${(r.params / 1e9).toFixed(2)}B, predicted step ${r.predicted?.stepSeconds.toFixed(4)} s`);
process.exit(0);

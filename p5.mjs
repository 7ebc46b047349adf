import { compile } from '/work/main/dist/src/compile.js';
const t0 = performance.now();
const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16', batch: 1, seq: 1024 });
console.log('compile', ((performance.now()-t0)/1e3).toFixed(2));

import { compile } from '/work/main/dist/src/compile.js';
const t0 = performance.now();
const plan = await compile({ model: 'models/gpt.ts', preset: 'gpt3-175b', hw: 'a100-80g', cpuMemBytes: 1e12, nvmeBytes: 8e12, precision: 'fp16' });
console.log(process.env.HX, 'compile', ((performance.now()-t0)/1e3).toFixed(2), plan.bound?.lowerBoundSeconds, plan.predicted.stepSeconds, plan.bound?.lp);

import { compile } from '/work/main/dist/src/compile.js';
const rows = [];
for (const preset of ['gpt2-124m', 'gpt2-1.5b', 'gpt3-6.7b', 'gpt3-13b']) for (const hw of ['v100-32g', 'a100-80g', 'h100-80g', 'h200-141g']) {
  const t0 = performance.now();
  try {
    const p = await compile({ model: 'models/gpt.ts', preset, hw, precision: 'fp16' });
    console.log(`| ${preset} | ${hw} | ${p.placement.method} | ${p.predicted.stepSeconds.toFixed(3)} | ${p.bound.lowerBoundSeconds.toFixed(3)} | ${p.bound.gapPercent.toFixed(1)} | ${((performance.now()-t0)/1e3).toFixed(1)} |`);
  } catch (e) { console.log(`| ${preset} | ${hw} | error: ${e.message.slice(0, 80)} |`); }
}

// The cases bench:compile measures (run.mjs) and whose plans plans.mjs
// fingerprints: compile options for src/compile.ts, each with a name.

/**
 * The large cases: compile time targets (issue 5: gpt3-175b <= 10 s, gpt2-1.5b
 * <= 1 s), each with the key one.mjs and repeat.mjs take: gpt2-1.5b
 * squeezed into 16 GB of a V100 (ZeRO-Offload's setting: the LP and its
 * candidates), gpt3-175b, and gpt2-1.5b where it fits the GPU (an A100: it
 * stays there, one LP for its bound over every placement).
 */
export const large = [
  { key: 'gpt2-1.5b', name: 'gpt2-1.5b, v100-32g, 16 GB GPU (ZeRO-Offload)', opts: { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16', batch: 1, seq: 1024 } },
  { key: 'gpt3-175b', name: 'gpt3-175b, a100-80g, 1 TB CPU, 8 TB NVMe', opts: { model: 'models/gpt.ts', preset: 'gpt3-175b', hw: 'a100-80g', cpuMemBytes: 1e12, nvmeBytes: 8e12, precision: 'fp16' } },
  { key: 'gpt2-1.5b-gpu', name: 'gpt2-1.5b, a100-80g (fits the GPU)', opts: { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'a100-80g', precision: 'fp16' } },
];

/** A preset on each profile of the grid, at the profile's default capacities (fp16, batch 1). */
const onProfiles = (model, preset) => ['v100-32g', 'a100-80g', 'h100-80g', 'h200-141g'].map((hw) => ({ name: `${preset} ${hw}`, preset, hw, opts: { model, preset, hw, precision: 'fp16' } }));

/** The gap grid: presets x profiles at their default capacities (fp16, batch 1). */
export const grid = ['gpt2-124m', 'gpt2-1.5b', 'gpt3-6.7b', 'gpt3-13b'].flatMap((preset) => onProfiles('models/gpt.ts', preset));

/**
 * The other presets on the same profiles (default capacities, fp16,
 * batch 1, each model's default sequence: LLaMA 4096, BERT 512): not in the
 * gap grid above, whose 2 % target the GPT presets measure; printed so that
 * their gaps are on record (docs/BENCHMARKS.md, fifty-second session).
 */
export const otherPresets = [['models/llama.ts', 'llama2-7b'], ['models/llama.ts', 'llama2-13b'], ['models/llama.ts', 'llama2-70b'], ['models/bert.ts', 'bert-large']].flatMap(([model, preset]) => onProfiles(model, preset));

/** Host memory that binds: the state does not fit GPU + CPU, part of it on NVMe (default NVMe). */
export const hostBound = [
  ['gpt3-6.7b, a100-80g, 24 GB GPU, 64 GB CPU', { preset: 'gpt3-6.7b', hw: 'a100-80g', gpuMemBytes: 24e9, cpuMemBytes: 64e9 }],
  ['gpt3-6.7b, v100-32g, 48 GB CPU', { preset: 'gpt3-6.7b', hw: 'v100-32g', cpuMemBytes: 48e9 }],
  ['gpt3-13b, v100-32g, 128 GB CPU', { preset: 'gpt3-13b', hw: 'v100-32g', cpuMemBytes: 128e9 }],
  ['gpt3-13b, a100-80g, 64 GB CPU', { preset: 'gpt3-13b', hw: 'a100-80g', cpuMemBytes: 64e9 }],
  ['llama2-13b, h100-80g, 96 GB CPU', { model: 'models/llama.ts', preset: 'llama2-13b', hw: 'h100-80g', cpuMemBytes: 96e9 }],
  ['llama2-7b, a100-80g, 24 GB GPU, 32 GB CPU', { model: 'models/llama.ts', preset: 'llama2-7b', hw: 'a100-80g', gpuMemBytes: 24e9, cpuMemBytes: 32e9 }],
  ['gpt2-1.5b, v100-32g, 8 GB GPU, 6 GB CPU', { preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 8e9, cpuMemBytes: 6e9 }],
].map(([name, o]) => ({ name, opts: { model: 'models/gpt.ts', precision: 'fp16', ...o } }));

/** Small plans of the other paths (min-cut, NVMe staging, DPU, bf16): seconds each. */
export const small = [
  { name: 'gpt tiny', opts: { model: 'models/gpt.ts', preset: 'tiny' } },
  { name: 'gpt tiny, state on NVMe', opts: { model: 'models/gpt.ts', preset: 'tiny', gpuMemBytes: 400000, cpuMemBytes: 200000 } },
  { name: 'gpt tiny fp16, state on NVMe, DPU', opts: { model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16', gpuMemBytes: 400000, cpuMemBytes: 200000, dpuWarmupSteps: 3 } },
  { name: 'llama tiny bf16', opts: { model: 'models/llama.ts', preset: 'tiny', precision: 'bf16' } },
  { name: 'bert tiny, 300 kB GPU', opts: { model: 'models/bert.ts', preset: 'tiny', gpuMemBytes: 300000 } },
  { name: 'gpt2-124m fp16 (batch 1, seq 32), 1 GB GPU, 600 MB CPU', opts: { model: 'models/gpt.ts', preset: 'gpt2-124m', batch: 1, seq: 32, precision: 'fp16', gpuMemBytes: 1e9, cpuMemBytes: 6e8 } },
];

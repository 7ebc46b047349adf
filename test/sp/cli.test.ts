// compile --sp from the command line: bad input is one line and exit code 2;
// the report shows each rank's memory and ring traffic, equal to the closed form.
import { describe, it, expect, beforeAll } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, expectUserError } from '../cli-helpers.js';
import { scratchDir } from '../scratch-dir.js';

const dir = scratchDir('tiercut-sp-');

describe('compile --sp: bad input', () => {
  const out = join(dir, 'x.json');
  it('fewer than one rank, or not a number', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '0', '-o', out), /--sp: expected a whole number of ranks from 1 to 1024, got '0' \[TC601\]/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '-2', '-o', out), /--sp: expected a whole number of ranks from 1 to 1024, got '-2'/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '1.5', '-o', out), /--sp: expected a whole number of ranks from 1 to 1024, got '1\.5'/);
  });
  it('a sequence that does not cut into 2P equal chunks (P too large, or not a divisor)', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '16', '-o', out), /--sp 16: the sequence of 16 tokens does not cut into 32 zigzag chunks of equal length \(2P must divide seq\); try --sp 2, 4, 8 \[TC601\]/);
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '3', '-o', out), /--sp 3: the sequence of 16 tokens does not cut into 6 zigzag chunks/);
  });
  it('a model without an attention op --sp can shard', () => {
    expectUserError(cli('compile', 'models/mlp.ts', '--sp', '2', '-o', out), /models\/mlp\.ts: --sp needs a causalAttention op to shard along the sequence; this model has none \[TC602\]/);
    expectUserError(cli('compile', 'models/llama.ts', '--preset', 'tiny', '--sp', '2', '-o', out), /models\/llama\.ts:\d+:\d+: --sp shards causalAttention .* not supported yet \[TC602\]/);
  });
  it('an op that mixes sequence positions names the op and the model line', () => {
    const model = join(dir, 'mixer.ts');
    writeFileSync(model, [
      "import type { Model, PresetBase } from 'tiercut/dsl';",
      'const m: Model<PresetBase> = {',
      '  presets: { a: { batch: 2, seq: 8 } },',
      '  build(nn, cfg) {',
      "    const tokens = nn.input('tokens', [cfg.batch, cfg.seq], 'i32'), targets = nn.input('targets', [cfg.batch, cfg.seq], 'i32');",
      "    let x = nn.embedding(tokens, nn.param('wte', [16, 8], { normal: 0.02 }));",
      "    x = nn.add(x, nn.causalAttention(nn.matmul(x, nn.param('qkv', [8, 24], { normal: 0.02 })), 2));",
      "    const mixed = nn.transpose(nn.matmul(nn.transpose(x, [0, 2, 1]), nn.param('mix', [cfg.seq, cfg.seq], { normal: 0.02 })), [0, 2, 1]);",
      "    return nn.crossEntropy(nn.matmul(mixed, nn.param('out', [8, 16], { normal: 0.02 })), targets);",
      '  },',
      '};',
      'export default m;',
    ].join('\n'));
    expectUserError(cli('compile', model, '--sp', '2', '-o', out), /mixer\.ts:8:\d+: --sp cannot shard transpose: it mixes sequence positions .*\[TC603\]/);
    expect(cli('compile', model, '-o', out).status).toBe(0); // fine without --sp
  });
  it('ring buffers that do not fit beside the arenas', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '--gpu-mem', '100000', '-o', out), /does not fit: the ring buffers of one attention call need 105\.00 KiB, the gpu tier holds 97\.66 KiB.*\[TC301\]/);
    // (beside them the arena does not fit: the capacity named is what the ring buffers leave, and the line says so)
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '--gpu-mem', '150000', '-o', out), /capacity is 41\.48 KiB .*\(with --sp, a gpu capacity named is the tier's less the 105\.00 KiB of one attention call's ring buffers beside the arena\) \[TC301\]$/);
    // (the collectives run on the GPU: a CPU too small for their buffers had been refused, though `run` takes the plan there)
    const small = join(dir, 'sp-small-cpu.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '--cpu-mem', '100KiB', '-o', small).status).toBe(0);
    expect(JSON.parse(readFileSync(small, 'utf8')).tiers.cpu.peakBytes).toBe(0);
    expect(cli('run', small, '--steps', '1', '--cpu-mem', '100KiB').status).toBe(0);
  });
  it('--sp over the ring\'s 1024 ranks: refused at compile and in a plan (run had crashed in the native check)', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--seq', '4096', '--sp', '2048', '-o', out), /--sp: expected a whole number of ranks from 1 to 1024, got '2048' \[TC601\]$/);
  });
  it('--sp with --dpu', () => {
    expectUserError(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '--dpu', '--precision', 'fp16', '-o', out), /--sp and --dpu together are not supported yet/);
  });
  it('a plan whose sp section disagrees with its graph', () => {
    const good = join(dir, 'sp2.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', '2', '-o', good).status).toBe(0);
    const plan = JSON.parse(readFileSync(good, 'utf8'));
    plan.sp.perRank.pop();
    const bad = join(dir, 'bad-sp.json');
    writeFileSync(bad, JSON.stringify(plan));
    expectUserError(cli('run', bad, '--steps', '1'), /bad-sp\.json: sp: perRank has 1 sections for 2 ranks \[TC402\]/);
    // (the ring kernel's causal mask is the zigzag layout's: a contiguous cut had trained on a wrong mask, silently)
    const cut = JSON.parse(readFileSync(good, 'utf8'));
    cut.sp.perRank[0].positions = Array.from({ length: 8 }, (_, i) => i);
    cut.sp.perRank[1].positions = Array.from({ length: 8 }, (_, i) => 8 + i);
    writeFileSync(bad, JSON.stringify(cut));
    expectUserError(cli('run', bad, '--steps', '1'), /sp: perRank\[0\]\.positions are not rank 0's zigzag positions \(chunks 0 and 3 of 4, 8 positions\) \[TC402\]/);
    // (collectives for another count of ranks had failed inside step 1; an sp section on a plain graph had run its ranks apart)
    const other = JSON.parse(readFileSync(good, 'utf8'));
    other.graph.ops.find((o: { kind: string }) => o.kind === 'allReduce').attrs.ranks = 3;
    writeFileSync(bad, JSON.stringify(other));
    expectUserError(cli('run', bad, '--steps', '1'), /op \d+ \(allReduce\) is for 3 ranks, the sp section for 2 \[TC402\]/);
    const plain = join(dir, 'plain.json');
    expect(cli('compile', 'models/gpt.ts', '--preset', 'tiny', '-o', plain).status).toBe(0);
    // (an sp section that fits the plain graph's inputs: its 16 tokens as each rank's half of 32)
    const grafted = JSON.parse(readFileSync(plain, 'utf8'));
    const zigzag = (r: number) => [...Array.from({ length: 8 }, (_, i) => r * 8 + i), ...Array.from({ length: 8 }, (_, i) => (3 - r) * 8 + i)];
    grafted.sp = { ranks: 2, seq: 32, inputs: [{ tensor: 0, name: 'tokens', axis: 1, fullShape: [4, 32] }, { tensor: 1, name: 'targets', axis: 1, fullShape: [4, 32] }],
      perRank: [0, 1].map((r) => ({ rank: r, positions: zigzag(r), ringSendBytes: { attention: 0, allReduce: 0 }, ringWorkspaceBytes: 0 })) };
    writeFileSync(bad, JSON.stringify(grafted));
    expectUserError(cli('run', bad, '--steps', '1'), /bad-sp\.json: sp: the graph has no ringAttention op/);
    // (over the native ring's 1024 ranks in a plan: refused as read, run had crashed in the ring's own check)
    const many = JSON.parse(readFileSync(good, 'utf8'));
    many.sp.ranks = 2048;
    writeFileSync(bad, JSON.stringify(many));
    expectUserError(cli('run', bad, '--steps', '1'), /bad-sp\.json: sp: ranks 2048 is over 1024 \[TC402\]/);
  });
});

describe('report of an --sp plan', () => {
  const plans: Record<number, string> = {};
  beforeAll(() => {
    for (const P of [2, 4]) {
      plans[P] = join(dir, `tiny.sp${P}.json`);
      const r = cli('compile', 'models/gpt.ts', '--preset', 'tiny', '--sp', String(P), '-o', plans[P]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`sequence parallel: ${P} ranks of ${16 / P} tokens`));
    }
  });
  for (const P of [2, 4]) {
    it(`--sp ${P}: per-rank peaks and ring bytes (closed form) in --json and text`, () => {
      const r = cli('report', plans[P], '--json');
      expect(r.status, r.stderr).toBe(0);
      const s = JSON.parse(r.stdout);
      const plan = JSON.parse(readFileSync(plans[P], 'utf8'));
      // tiny: L = 2 layers, B = 4, T = 16, C = 32; R = T / P rows per rank
      const L = 2, B = 4, T = 16, C = 32, R = T / P, N = s.params;
      // ring attention per layer: forward P-1 k/v hops, backward P-1 k/v + P dk/dv hops, each 2*B*R*C floats
      const attention = L * (3 * P - 2) * 4 * 2 * B * R * C;
      // all-reduce: 2(P-1) chunks of n/P floats per parameter (every tiny parameter's size is a multiple of 4)
      const allReduce = 4 * 2 * (P - 1) * (N / P);
      expect(s.sp.ranks).toBe(P);
      expect(s.sp.tokensPerRank).toBe(R);
      expect(s.sp.perRank.length).toBe(P);
      for (const [k, rank] of s.sp.perRank.entries()) {
        expect(rank.rank).toBe(k);
        expect(rank.positions.length).toBe(R);
        expect(rank.ringSendBytes).toEqual({ attention, allReduce, total: attention + allReduce });
        // the largest collective is an attention backward: 18n + B NH R + 2 D R floats (n = B R C) and two 64x64 tiles
        const NH = 4, D = C / NH, n = B * R * C;
        expect(rank.ringWorkspaceBytes).toBe(4 * (18 * n + B * NH * R + 2 * D * R + 2 * 64 * 64));
        for (const tier of ['gpu', 'cpu', 'nvme']) expect(rank.peakBytes[tier]).toBe(plan.tiers[tier].peakBytes);
      }
      const text = cli('report', plans[P]);
      expect(text.status).toBe(0);
      expect(text.stdout).toMatch(new RegExp(`sequence parallel: ${P} ranks \\(threads of one process\\), ${R} of 16 tokens each`));
      expect(text.stdout).toMatch(/rank {2}gpu peak {4}cpu peak {4}nvme peak {3}ring buffers {2}ring attention {2}all-reduce {2}ring total/);
      expect(text.stdout.split('\n').filter((l) => /^ {3}\d /.test(l)).length).toBe(P);
    });
  }

  it('run --json: the mean of the rank losses; measured ring bytes and peaks equal the plan', () => {
    const r = cli('run', plans[2], '--steps', '2', '--json');
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0].rankLosses.length).toBe(2);
    expect(lines[0].loss).toBeCloseTo((lines[0].rankLosses[0] + lines[0].rankLosses[1]) / 2, 6);
    const { summary } = lines[2];
    for (const rank of summary.perRank) {
      expect(rank.ringSentBytesPerStep).toBe(rank.plannedRingSentBytesPerStep);
      expect(rank.ringWorkspaceBytes).toBe(rank.plannedRingWorkspaceBytes);
      expect(rank.peakBytes.gpu).toBe(summary.planPeakBytes.gpu);
    }
  });
});

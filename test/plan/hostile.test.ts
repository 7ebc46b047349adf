// A hostile or corrupt plan is rejected when it is read (compiler/plan/io.ts:
// schema, then verify-plan.ts) with one UserError naming the field, never a
// TypeError from deeper down or a plan the runtime would trust wrongly. The
// cases below each reached the runtime before verify-plan checked the graph
// and the homes (found by mutating plans at random; tiercut run then failed
// with a stack trace).
import { describe, it, expect, beforeAll } from 'vitest';
import { compile } from '../../src/compile.js';
import { parsePlan, serializePlan } from '../../compiler/plan/io.js';
import { UserError } from '../../src/diagnostics.js';
import type { Plan } from '../../compiler/plan/types.js';

let text: string;
beforeAll(async () => {
  text = serializePlan(await compile({ model: 'models/gpt.ts', preset: 'tiny', gpuMemBytes: 400000 }));
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function mutated(f: (p: any) => void): string {
  const p = JSON.parse(text);
  f(p);
  return JSON.stringify(p);
}

function rejects(plan: string, message: RegExp): void {
  let err: unknown;
  try { parsePlan(plan, 'hostile.plan.json'); } catch (e) { err = e; }
  expect(err, 'the plan was accepted').toBeInstanceOf(UserError);
  expect((err as Error).message).toMatch(/^hostile\.plan\.json: /);
  expect((err as Error).message).toMatch(message);
}

describe('a hostile plan is rejected with one line naming the field', () => {
  it('the original reads back', () => {
    expect(parsePlan(text, 'good.plan.json').graph.ops.length).toBeGreaterThan(0);
  });

  it('a tensor or an op whose id is not its index', () => {
    rejects(mutated((p) => { p.graph.tensors[30].id = 0; }), /graph: tensor \S+: id 0 at index 30/);
    rejects(mutated((p) => { p.graph.ops[41].id = 40; }), /graph: op 41 \(\w+, [^)]*\): id 40 at index 41/);
    rejects(mutated((p) => { p.graph.ops[3].id = 2 ** 53; }), /graph: op 3 .*: id 9007199254740992 at index 3/);
  });

  it('a data input or a state tensor with no home through the step', () => {
    const input = JSON.parse(text).graph.tensors.find((t: { role: string }) => t.role === 'input').id;
    rejects(mutated((p) => { p.buffers.find((b: { tensor: number }) => b.tensor === input).freeAt = 0; }), /tensor \d+ \(\w+, a data input\): no buffer lives through the step/);
    rejects(mutated((p) => {
      const b = p.buffers.find((x: { tensor: number; allocAt: number }) => p.graph.tensors[x.tensor].persistent && x.allocAt < 0);
      b.allocAt = 0;
    }), /\(\S+, state\): no buffer lives through the step|reads buffers\[\d+\] before anything writes it/);
  });

  it('an initialiser of an unknown kind, or data of the wrong length', () => {
    rejects(mutated((p) => { p.graph.tensors.find((t: { init?: unknown }) => t.init).init.kind = 'matmul'; }), /graph: tensors\[\d+\] \(\S+\): init kind "matmul" is not one of normal, constant, onnx, data/);
    rejects(mutated((p) => { const t = p.graph.tensors.find((x: { init?: unknown }) => x.init); delete t.init.kind; }), /plan\.graph\.tensors\[\d+\]\.init: missing 'kind'/);
    rejects(mutated((p) => { p.graph.tensors.find((t: { init?: unknown }) => t.init).init = { kind: 'data', f32Base64: 'AAAAAA==' }; }), /init data holds 4 bytes, the tensor \d+ f32 values/);
  });

  it('a shape that disagrees with its bytes, or with the op catalog', () => {
    rejects(mutated((p) => { p.graph.tensors[5].shape = [...p.graph.tensors[5].shape, 2]; }), /graph: tensors\[5\] \(\S+\): \d+ bytes, but \w+ \[[\d,]+\] is \d+/);
    rejects(mutated((p) => {
      // a matmul's output made twice as wide, bytes and buffers to match: only the catalog can tell
      const op = p.graph.ops.find((o: { kind: string }) => o.kind === 'matmul');
      const t = p.graph.tensors[op.outputs[0]];
      t.shape = [...t.shape.slice(0, -1), t.shape[t.shape.length - 1] * 2];
      t.sizeBytes *= 2;
      for (const b of p.buffers) if (b.tensor === t.id) b.sizeBytes = t.sizeBytes;
    }), /graph: op \d+ \(matmul, .*\): output \S+ is \[[\d,]+\], the catalog says \[[\d,]+\]/);
  });

  it('a numeric attribute that JSON turned into null (NaN, an infinity)', () => {
    rejects(mutated((p) => { p.graph.ops.find((o: { kind: string }) => o.kind === 'layerNorm').attrs.eps = null; }), /graph: op \d+ \(layerNorm, .*\): attribute eps is null \(a finite number or absent\)/);
  });

  // a review's finds: each had been accepted, and then trained differently from
  // run to run, saved a checkpoint short of parameters, or crashed report
  it('a write or free that does not wait for the reads of the value before it (a race: different losses from run to run)', () => {
    const p = JSON.parse(text) as Plan;
    // drop one wait at a time: some leave a read unordered with a later write of its bytes, and each must be refused
    let races = 0;
    for (const x of p.instructions) {
      for (const w of x.waits) {
        const q = JSON.parse(text) as Plan;
        (q.instructions[x.id] as { waits: number[] }).waits = x.waits.filter((v) => v !== w);
        let msg = '';
        try { parsePlan(JSON.stringify(q), 'hostile.plan.json'); } catch (e) { expect(e).toBeInstanceOf(UserError); msg = (e as Error).message; }
        if (/(writes|frees) buffers\[\d+\] without waiting for instruction \d+ that reads it/.test(msg)) races++;
      }
    }
    expect(races).toBeGreaterThan(0);
  });

  it('a plan whose parts disagree: precision and the tensors\' dtypes, two tensors of one parameter, a copy from NVMe to the GPU or on another\'s stream, a run on a copy stream, a free naming an op, a home not where its buffer is, remat of a data input, a param count, a fractional peak, attributes the runtime cannot take, an init past f32 or null', () => {
    const t = (p: Plan, role: string) => p.graph.tensors.find((x) => x.role === role)!;
    rejects(mutated((p) => { p.graph.precision = 'fp16'; }), /graph: tensors\[\d+\] \(\S+\): a param16 of f32 in a graph of precision fp16/);
    rejects(mutated((p) => { const [a, b] = p.graph.tensors.filter((x: { role: string }) => x.role === 'param16'); b.param = a.param ?? a.name; }), /graph: tensors\[\d+\] and tensors\[\d+\]: two param16 tensors of the parameter/);
    const plan = JSON.parse(text) as Plan;
    const copy = plan.instructions.find((x) => x.kind === 'copy' && plan.buffers[x.inputs[0]].tier === 'cpu' && plan.buffers[x.outputs[0]].tier === 'gpu')!;
    rejects(mutated((p) => { p.instructions[copy.id].stream = 'd2h'; }), new RegExp(`instructions\\[${copy.id}\\]: a copy from cpu to gpu on the d2h stream \\(it goes on h2d\\)`));
    rejects(mutated((p) => { const b = p.buffers[copy.inputs[0]]; b.tier = 'nvme'; p.placement.home[b.tensor] = 'nvme'; p.tiers.nvme.peakBytes = Math.max(p.tiers.nvme.peakBytes, b.offsetBytes + b.sizeBytes); }), /a copy from nvme to gpu \(copies go between the GPU and the CPU, or the CPU and NVMe\)/);
    const run = plan.instructions.find((x) => x.kind === 'run' && x.stream === 'gpu')!;
    rejects(mutated((p) => { p.instructions[run.id].stream = 'nvmeWrite'; }), new RegExp(`instructions\\[${run.id}\\]: a run on the nvmeWrite stream \\(runs go on gpu or cpu\\)`));
    const free = plan.instructions.find((x) => x.kind === 'free')!;
    rejects(mutated((p) => { p.instructions[free.id].op = 0; }), new RegExp(`instructions\\[${free.id}\\]: op 0 on a free \\(expected -1\\)`));
    const home = plan.buffers.find((b) => b.allocAt < 0 && b.freeAt < 0)!;
    rejects(mutated((p) => { p.placement.home[home.tensor] = home.tier === 'gpu' ? 'cpu' : 'gpu'; }), new RegExp(`placement\\.home\\[${home.tensor}\\]: \\w+, but the buffer that keeps \\S+ through the step is on ${home.tier}`));
    const input = t(plan, 'input');
    rejects(mutated((p) => { p.placement.remat = p.graph.tensors.map((x: { id: number }) => x.id === input.id); }), new RegExp(`placement\\.remat\\[${input.id}\\]: ${input.name} is a data input, which no op makes again`));
    rejects(mutated((p) => { p.graph.paramCount = 123; }), /graph: paramCount 123, but its trainable param16 tensors hold \d+ values/);
    rejects(mutated((p) => { p.tiers.cpu.peakBytes += 0.5; }), /tiers\.cpu\.peakBytes: expected integer/);
    rejects(mutated((p) => { p.graph.ops.find((o: { kind: string }) => o.kind === 'layerNorm').attrs.eps = -1; }), /graph: op \d+ \(layerNorm\): attrs: eps -1 is below 0/);
    rejects(mutated((p) => { p.graph.ops.find((o: { kind: string }) => o.kind === 'causalAttention').attrs.heads = '2'; }), /graph: op \d+ \(causalAttention\): attrs: expected integers, got \["2"\]/);
    rejects(mutated((p) => { p.graph.ops.find((o: { kind: string }) => o.kind === 'matmul').attrs.transB = 'yes'; }), /attrs: transB "yes" is not a boolean/);
    rejects(mutated((p) => { p.graph.tensors.find((x: { init?: { kind: string } }) => x.init?.kind === 'constant').init.value = 1e39; }), /init constant needs a finite value within f32/);
    rejects(mutated((p) => { p.graph.tensors.find((x: { init?: unknown }) => x.init).init = null; }), /graph\.tensors\[\d+\]\.init: expected object, got null/);
    // an operand out of range is said, not hidden by a TypeError from a later loop
    rejects(mutated((p) => { p.graph.tensors.pop(); }), /operand \d+ does not exist|tensor \d+ does not exist/);
  });

  it('an f16 initial value is judged as f16 rounds it: under 65520 it is finite (65504), from 65520 it is inf', async () => {
    const half = JSON.parse(serializePlan(await compile({ model: 'models/gpt.ts', preset: 'tiny', precision: 'fp16' })));
    const at = half.graph.tensors.findIndex((x: { dtype: string; init?: { kind: string } }) => x.dtype === 'f16' && x.init?.kind === 'constant');
    expect(at).toBeGreaterThanOrEqual(0);
    const withValue = (v: number) => { const p = structuredClone(half); p.graph.tensors[at].init.value = v; return JSON.stringify(p); };
    for (const v of [65504, 65519.99, -65519.99]) expect(parsePlan(withValue(v), 'half.plan.json').graph.tensors[at].init).toMatchObject({ value: v });
    for (const v of [65520, -65520, 65519.999, 1e5]) { // (65519.999 is 65520 as f32, the runtime's first step)
      let err: unknown;
      try { parsePlan(withValue(v), 'half.plan.json'); } catch (e) { err = e; }
      expect(err).toBeInstanceOf(UserError);
      expect((err as Error).message).toMatch(/init constant needs a finite value within f16/);
    }
  });

  it('random mutations of every field: each plan reads back or is rejected by a UserError', () => {
    // (deterministic: a fixed LCG; numbers, strings, arrays and keys anywhere in the plan)
    let s = 12345;
    const rnd = () => { s = (s * 1103515245 + 12345) % 2147483648; return s / 2147483648; };
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)];
    type Leaf = { parent: Record<string | number, unknown>; key: string | number; v: unknown };
    const leaves = (o: unknown, out: Leaf[], parent?: Leaf['parent'], key?: string | number): Leaf[] => {
      if (parent !== undefined) out.push({ parent, key: key!, v: o });
      if (o && typeof o === 'object') for (const [k, v] of Object.entries(o)) leaves(v, out, o as Leaf['parent'], Array.isArray(o) ? Number(k) : k);
      return out;
    };
    let rejected = 0;
    for (let n = 0; n < 300; n++) {
      const p = JSON.parse(text) as Plan;
      const all = leaves(p, []);
      const { parent, key, v } = pick(all);
      if (typeof v === 'number') parent[key] = pick([-1, 0, 1, 2 ** 31, 2 ** 53, 1e308, 0.5, v + 1, v - 1, v * 2, null, '7']);
      else if (typeof v === 'string') parent[key] = pick(['', 'gpu', 'nvme', 'matmul', 'copy', 0]);
      else if (typeof v === 'boolean') parent[key] = !v;
      else if (Array.isArray(v)) { if (rnd() < 0.5) v.pop(); else v.push(structuredClone(v[0])); }
      else if (v && typeof v === 'object') { const ks = Object.keys(v); if (ks.length) delete (v as Record<string, unknown>)[pick(ks)]; }
      try { parsePlan(JSON.stringify(p), 'hostile.plan.json'); } catch (e) {
        expect(e, `mutation ${n} at ${String(key)}: ${(e as Error).stack}`).toBeInstanceOf(UserError);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(100);
  });
});

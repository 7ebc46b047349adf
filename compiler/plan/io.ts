// Plan files: write (deterministic JSON) and read (version check, schema,
// then the plan verifier). A plan that fails any check is rejected with the
// file name and the first problem; nothing downstream sees it.

import { readFileSync } from 'node:fs';
import { osReason, writeOutput } from '../../src/atomic-write.js';
import { checkProfile } from '../cost/profiles.js';
import { diag } from '../../src/diagnostics.js';
import { verifyPlan } from '../simulate/verify-plan.js';
import { MAX_SP_RANKS, rankRingNumbers, zigzagPositions } from '../lower/sequence-parallel.js';
import { PLAN_SCHEMA, validateSchema } from './schema.js';
import { FORMAT_VERSION, type Plan } from './types.js';
import type { Graph, Op } from '../ir/types.js';

export function serializePlan(plan: Plan): string {
  try {
    return JSON.stringify(plan) + '\n';
  } catch (e) {
    // (V8's strings end at 2^29 - 24 characters: a RangeError with a stack trace had been all the user saw)
    if (e instanceof RangeError) throw diag.cannotWrite(`the plan is too large to write as JSON (${e.message}): its graph has ${plan.graph.tensors.length} tensors and ${plan.graph.ops.length} ops`);
    throw e;
  }
}

/** Writes atomically (a temp file, fsync, rename: src/atomic-write.ts); a disk that will not take it is one UserError line, the old file kept. */
export function writePlan(file: string, plan: Plan): void {
  writeOutput(file, serializePlan(plan), 'the plan');
}

export function parsePlan(text: string, file: string): Plan {
  let json: unknown;
  try { json = JSON.parse(text); } catch (e) { throw diag.planFormat(file, `not a plan: invalid JSON (${(e as Error).message})`); }
  return checkPlan(json, file);
}

/**
 * A plan object checked as a plan file is (parsePlan's checks: the schema,
 * then what it cannot say), for callers of the API that make or edit one:
 * a session checks the plan it is given (two live buffers on the same bytes,
 * a loss tensor that is a parameter, lr -1 had all trained). `file` names it
 * in the messages. Every call checks (an object passed once had been taken
 * as checked ever after, edits and all). Throws UserError TC401/TC402.
 */
export function checkPlan(json: unknown, file: string): Plan {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw diag.planFormat(file, 'not a plan: expected a JSON object');
  const version = (json as { formatVersion?: unknown }).formatVersion;
  if (version !== FORMAT_VERSION) throw diag.planFormat(file, `formatVersion ${JSON.stringify(version)} is not supported (this tiercut reads version ${FORMAT_VERSION}); recompile the model`);
  const problems = validateSchema(json);
  if (problems.length) throw diag.planInvalid(file, `does not match the plan schema: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`);
  const plan = json as Plan;
  // (the schema only requires these to be there: a rate of 0 had crashed report, NaN hyperparameters surfaced as "the gradient has an inf or NaN")
  try { checkProfile('hardware', plan.hardware); } catch (e) { throw diag.planInvalid(file, (e as Error).message); }
  const o = plan.optimizer;
  if (!(o.lr >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0 && o.weightDecay >= 0)) throw diag.planInvalid(file, `optimizer: expected lr and weightDecay >= 0, eps > 0 and betas in [0, 1), got ${jsonText(o)}`);
  if (!(plan.predicted.stepSeconds > 0)) throw diag.planInvalid(file, `predicted.stepSeconds: expected a positive number, got ${plan.predicted.stepSeconds}`);
  // (the bound as compile gives it: at most the step, the gap theirs; 1e300 s with a gap of -50 % had been printed)
  const b = plan.bound, step = plan.predicted.stepSeconds;
  const gap = b && Math.max(0, (100 * (step - b.lowerBoundSeconds)) / b.lowerBoundSeconds); // (compile's, withBound)
  if (b && !(b.lowerBoundSeconds > 0 && b.lowerBoundSeconds <= step * (1 + 2e-6) && Math.abs(b.gapPercent - gap!) <= 1e-6 * Math.max(1, b.gapPercent)))
    throw diag.planInvalid(file, `bound: lowerBoundSeconds ${b.lowerBoundSeconds} and gapPercent ${b.gapPercent} do not fit predicted.stepSeconds ${plan.predicted.stepSeconds}`);
  const errors = verifyPlan(plan);
  if (errors.length) throw diag.planInvalid(file, `${errors[0]}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`);
  if (plan.dpu !== undefined) {
    const d = plan.dpu as { warmupSteps?: unknown; steady?: unknown; declined?: unknown };
    if (!Number.isInteger(d.warmupSteps) || (d.warmupSteps as number) < 0) throw diag.planInvalid(file, `dpu.warmupSteps: expected a non-negative integer, got ${jsonText(d.warmupSteps)}`);
    if ((d.steady === undefined) === (d.declined === undefined)) throw diag.planInvalid(file, `dpu: expected exactly one of steady and declined, got ${d.steady === undefined ? 'neither' : 'both'}`);
    if (d.steady !== undefined) {
      const sub = validateSchema(d.steady, PLAN_SCHEMA, 'plan.dpu.steady');
      if (sub.length) throw diag.planInvalid(file, `does not match the plan schema: ${sub[0]}`);
      const steadyErrors = verifyPlan(d.steady as Plan);
      if (steadyErrors.length) throw diag.planInvalid(file, `dpu.steady: ${steadyErrors[0]}`);
      // the steady step takes over the plain step's buffers' values by tensor id: the same tensors, optimizer and machine
      const st = d.steady as Plan;
      const problem = steadyProblem(plan.graph, st.graph);
      if (problem) throw diag.planInvalid(file, `dpu.steady: ${problem}`);
      if (jsonText(st.optimizer) !== jsonText(plan.optimizer) || jsonText(st.hardware) !== jsonText(plan.hardware)) throw diag.planInvalid(file, 'dpu.steady: its optimizer or hardware differs from the plain step\'s');
    }
  }
  // (a dpu section on an sp plan had been ignored: the ranks never switch)
  if (plan.sp !== undefined && plan.dpu !== undefined) throw diag.planInvalid(file, 'a plan has an sp section or a dpu section, not both');
  if (plan.sp !== undefined) {
    const problem = spProblem(plan);
    if (problem) throw diag.planInvalid(file, `sp: ${problem}`);
  }
  for (const [where, p] of [['', plan], ['dpu.steady: ', plan.dpu?.steady]] as const) {
    if (!p) continue;
    const t = (['gpu', 'cpu', 'nvme'] as const).find((k) => p.tiers[k].capacityBytes !== p.hardware[k].capacityBytes);
    if (t) throw diag.planInvalid(file, `${where}tiers.${t}.capacityBytes ${p.tiers[t].capacityBytes} is not the hardware's ${p.hardware[t].capacityBytes}`);
    const collective = collectiveProblem(p, plan.sp?.ranks);
    if (collective) throw diag.planInvalid(file, where + collective);
  }
  // (the ring numbers as the plan's ops make them, once the ops are known to be the sp section's:
  // tampered to 0, run had reported "plan 0" beside what it sent)
  for (const [i, r] of (plan.sp?.perRank ?? []).entries()) {
    const ring = rankRingNumbers(plan.graph, plan.instructions, i);
    if (r.ringWorkspaceBytes !== ring.ringWorkspaceBytes || r.ringSendBytes?.attention !== ring.ringSendBytes.attention || r.ringSendBytes?.allReduce !== ring.ringSendBytes.allReduce)
      throw diag.planInvalid(file, `sp: perRank[${i}]: ringWorkspaceBytes ${r.ringWorkspaceBytes} and ringSendBytes ${jsonText(r.ringSendBytes)} are not what its ops take and send (${ring.ringWorkspaceBytes}, ${jsonText(ring.ringSendBytes)})`);
  }
  return plan;
}

/** JSON text for comparing two parts of a plan; a part nested too deeply to write is '' (unequal to any part that can be written). */
function jsonText(v: unknown): string {
  try { return JSON.stringify(v) ?? 'undefined'; } catch { return ''; }
}

/**
 * The steady step's graph as lowerDpu makes it from the plain one: the same
 * tensors (a delayed update's gradient made state), the same ops in another
 * order, the same precision and loss. A role, param, precision or an op's
 * attribute changed had been taken: a checkpoint without a parameter, or
 * another model trained after the warm-up.
 */
function steadyProblem(plain: Graph, steady: Graph): string | undefined {
  if (steady.tensors.length !== plain.tensors.length) return `${steady.tensors.length} tensors, the plain step has ${plain.tensors.length}`;
  if (steady.precision !== plain.precision || steady.loss !== plain.loss || steady.paramCount !== plain.paramCount) return 'its precision, loss or parameter count differs from the plain step\'s';
  for (const [i, t] of plain.tensors.entries()) {
    const s = steady.tensors[i];
    const madeState = t.role === 'grad16' && !t.persistent && s.persistent; // (a delayed update's gradient)
    if (s.name !== t.name || s.dtype !== t.dtype || JSON.stringify(s.shape) !== JSON.stringify(t.shape) || s.role !== t.role || s.param !== t.param
      || (s.persistent !== t.persistent && !madeState) || (!madeState && jsonText(s.init) !== jsonText(t.init)) || Boolean(s.frozen) !== Boolean(t.frozen))
      return `tensor ${i} is not the plain step's ${t.name}`;
  }
  if (steady.ops.length !== plain.ops.length) return `${steady.ops.length} ops, the plain step has ${plain.ops.length}`;
  const key = (o: Op) => jsonText([o.kind, o.inputs, o.outputs, o.attrs, o.phase]);
  const want = plain.ops.map(key).sort(), got = steady.ops.map(key).sort();
  const at = want.findIndex((k, i) => k !== got[i]);
  if (at >= 0) return `its ops are not the plain step's reordered (e.g. ${got[at]})`;
  return undefined;
}

/**
 * Collectives only in a sequence-parallel plan, each for its ranks, and
 * attention there only as ring attention: an sp section on a plain graph had
 * run its ranks apart (each attending to its own tokens, updating its own
 * parameters), and ops for 3 ranks in a plan of 2 failed inside step 1.
 */
function collectiveProblem(plan: Plan, ranks: number | undefined): string | undefined {
  let rings = 0;
  for (const o of plan.graph.ops) {
    if (o.kind !== 'ringAttention' && o.kind !== 'ringAttentionBackward' && o.kind !== 'allReduce') continue;
    if (o.kind === 'ringAttention') rings++;
    if (ranks === undefined) return `op ${o.id} (${o.kind}) is a collective, and the plan has no sp section`;
    if (o.attrs.ranks !== ranks) return `op ${o.id} (${o.kind}) is for ${o.attrs.ranks} ranks, the sp section for ${ranks}`;
  }
  if (ranks !== undefined && rings === 0) return 'sp: the graph has no ringAttention op: its ranks would not see each other\'s tokens';
  return undefined;
}

/** What the schema cannot say about the sp section: one section per rank, in order, each holding seq / ranks positions; the inputs it names exist. */
function spProblem(plan: Plan): string | undefined {
  const sp = plan.sp!, g = plan.graph;
  if (sp.ranks > MAX_SP_RANKS) return `ranks ${sp.ranks} is over ${MAX_SP_RANKS}`;
  if (sp.seq % (2 * sp.ranks) !== 0) return `seq ${sp.seq} is not a multiple of 2 * ranks (${2 * sp.ranks})`;
  const R = sp.seq / sp.ranks;
  if (sp.perRank.length !== sp.ranks) return `perRank has ${sp.perRank.length} sections for ${sp.ranks} ranks`;
  for (const [i, r] of sp.perRank.entries()) {
    if (r.rank !== i) return `perRank[${i}].rank is ${r.rank}, expected ${i}`;
    // (the ring kernel's causal mask is the zigzag layout's: any other cut, two ranks with one position or a
    // contiguous split alike, had trained on a wrong sequence, silently)
    // (the length first: seq 2^32 had built a zigzag of 2^31 positions, out of memory)
    if (r.positions.length !== R) return `perRank[${i}].positions holds ${r.positions.length} positions, rank ${i} of ${sp.ranks} holds ${R} of seq ${sp.seq}`;
    const want = zigzagPositions(sp.seq, sp.ranks, i);
    if (r.positions.some((p, k) => p !== want[k])) return `perRank[${i}].positions are not rank ${i}'s zigzag positions (chunks ${i} and ${2 * sp.ranks - 1 - i} of ${2 * sp.ranks}, ${R} positions)`;
  }
  for (const [i, input] of sp.inputs.entries()) {
    const t = g.tensors[input.tensor];
    // (every other axis the tensor's own: fullShape [1e9,16] had been allocated for the data)
    if (!t || t.role !== 'input' || input.axis >= input.fullShape.length || t.shape[input.axis] !== R || input.fullShape[input.axis] !== sp.seq
      || input.fullShape.length !== t.shape.length || input.fullShape.some((d, k) => k !== input.axis && d !== t.shape[k]))
      return `inputs[${i}]: tensor ${input.tensor} is not a data input cut from ${sp.seq} to ${R} along axis ${input.axis}`;
  }
  if (sp.positions !== undefined) {
    const t = g.tensors[sp.positions];
    if (!t || t.role !== 'input' || t.dtype !== 'i32' || t.shape.length !== 1 || t.shape[0] !== R) return `positions: tensor ${sp.positions} is not an i32 input [${R}]`;
  }
  // (an input in neither had passed, then stopped step 1 as if the data lacked it)
  const cut = new Set([...sp.inputs.map((x) => x.tensor), ...(sp.positions !== undefined ? [sp.positions] : [])]);
  const uncut = g.tensors.find((t) => t.role === 'input' && !cut.has(t.id));
  if (uncut) return `the data input ${uncut.name} (tensor ${uncut.id}) is neither in inputs (cut along the sequence) nor the positions`;
  return undefined;
}

export function readPlan(file: string): Plan {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw diag.fileNotFound(file, 'plan file');
    throw diag.planFormat(file, `cannot read it: ${osReason(e)}`); // (a directory, a file past Node's string limit: each had been "not found")
  }
  return parsePlan(text, file);
}

// The plan's JSON Schema (the subset of draft 2020-12 that a small validator
// here checks: type, properties, required, items, enum, minimum, const) and the
// validator. docs/PLAN-FORMAT.md explains the fields; docs/plan.schema.json is
// this object written out by `npm run schema`.

import { FORMAT_VERSION, STREAMS } from './types.js';
import { OP_KINDS } from '../ir/ops.js';
import { ROLES } from '../ir/types.js';

type Schema = {
  type?: 'object' | 'array' | 'string' | 'number' | 'integer' | 'boolean';
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: readonly (string | number)[];
  minimum?: number;
  const?: number | string;
  description?: string;
};

const int = (minimum?: number): Schema => (minimum === undefined ? { type: 'integer' } : { type: 'integer', minimum });
const num: Schema = { type: 'number' };
const ints: Schema = { type: 'array', items: int(0) };
const tier: Schema = { type: 'string', enum: ['gpu', 'cpu', 'nvme'] };
/** A non-negative quantity (seconds, bytes). */
const nonNegative: Schema = { type: 'number', minimum: 0 };
// (whole bytes: a fractional peak had passed, and the runtime then named program.tiers[1].arenaBytes)
const tierSummary: Schema = { type: 'object', required: ['capacityBytes', 'peakBytes'], properties: { capacityBytes: int(0), peakBytes: int(0) } };

export const PLAN_SCHEMA: Schema & { $schema: string; $id: string; title: string } = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://tiercut.dev/plan.schema.json',
  title: 'tiercut offload plan',
  type: 'object',
  required: ['formatVersion', 'generator', 'model', 'hardware', 'optimizer', 'graph', 'placement', 'tiers', 'buffers', 'instructions', 'traffic', 'predicted'],
  properties: {
    formatVersion: { const: FORMAT_VERSION, description: 'readers reject any other version' },
    generator: { type: 'string' },
    model: { type: 'object', required: ['source', 'preset', 'config'], properties: { source: { type: 'string' }, preset: { type: 'string' }, config: { type: 'object' } } },
    hardware: { type: 'object', required: ['name', 'gpu', 'cpu', 'nvme', 'h2dBytesPerSec', 'd2hBytesPerSec'], properties: { name: { type: 'string' } } },
    optimizer: {
      type: 'object', required: ['lr', 'beta1', 'beta2', 'eps', 'weightDecay', 'adamw'],
      properties: { lr: num, beta1: num, beta2: num, eps: num, weightDecay: num, adamw: { type: 'boolean' } },
    },
    graph: {
      type: 'object', required: ['name', 'tensors', 'ops', 'loss', 'precision', 'paramCount'],
      properties: {
        name: { type: 'string' },
        loss: int(0),
        precision: { type: 'string', enum: ['fp32', 'fp16', 'bf16'] },
        paramCount: int(0),
        tensors: {
          type: 'array', items: {
            type: 'object', required: ['id', 'name', 'shape', 'dtype', 'sizeBytes', 'role', 'persistent'],
            properties: {
              id: int(0), name: { type: 'string' }, shape: { type: 'array', items: int(1) },
              dtype: { type: 'string', enum: ['f32', 'f16', 'bf16', 'i32', 'i64'] }, sizeBytes: int(0),
              role: { type: 'string', enum: ROLES }, persistent: { type: 'boolean' }, param: { type: 'string' },
              frozen: { type: 'boolean', description: 'a parameter kept fixed: no gradient, no update' },
              init: { type: 'object', required: ['kind'], description: 'how the runtime makes its first value: normal, constant, onnx or data (see PLAN-FORMAT.md)' },
              slice: {
                type: 'object', required: ['of', 'whole', 'axis', 'ranges'],
                description: 'a part of the parameter `of` (whole shape `whole`): the ranges [start, end) of axis `axis`, side by side; checkpoints and initial values are the whole\'s',
                properties: { of: { type: 'string' }, whole: { type: 'array', items: int(1) }, axis: int(0), ranges: { type: 'array', items: { type: 'array', items: int(0) } } },
              },
            },
          },
        },
        ops: {
          type: 'array', items: {
            type: 'object', required: ['id', 'kind', 'inputs', 'outputs', 'attrs', 'phase', 'flops', 'bytesTouched', 'loc'],
            properties: {
              id: int(0), kind: { type: 'string', enum: OP_KINDS }, inputs: ints, outputs: ints, attrs: { type: 'object' },
              phase: { type: 'string', enum: ['forward', 'backward', 'update'] }, flops: { type: 'number', minimum: 0 },
              bytesTouched: { type: 'number', minimum: 0 }, loc: { type: 'object', required: ['file'] },
            },
          },
        },
      },
    },
    placement: {
      type: 'object', required: ['opTier', 'home', 'method'],
      properties: {
        opTier: { type: 'array', items: { type: 'string', enum: ['gpu', 'cpu'] } }, home: { type: 'array', items: tier },
        method: { type: 'string', enum: ['all-gpu', 'mincut', 'lp'] },
        remat: { type: 'array', items: { type: 'boolean' }, description: 'per tensor: no home, made again by its producer for each use' },
        forwardCastOnCpu: { type: 'array', items: { type: 'boolean' }, description: "per op: a cast on the GPU whose runs for the forward pass's reads run on the CPU" },
        castLead: { ...int(0), description: "how many more CPU updates the CPU's casts of remade p16 for the GPU's next ops are drafted ahead of" },
        rerunHeld: { ...int(0), description: "ops within which the output of a producer run again is kept for its next reader on the same tier" },
      },
    },
    dpu: {
      type: 'object', required: ['warmupSteps'],
      description: "delayed parameter update: after warmupSteps steps of this plan, the runtime switches to steady (a whole plan, validated the same way), in which the updates this plan runs on the CPU are delayed; or, where that does not pay, no steady and `declined`: its reason (no update runs on the CPU; the steady step, steadyStepSeconds, no faster than this plan's; or it does not fit, with compile's message)",
      properties: {
        warmupSteps: int(0), steady: { type: 'object' },
        declined: {
          type: 'object', required: ['reason', 'delayedUpdates'],
          properties: { reason: { type: 'string', enum: ['nothing-to-delay', 'slower', 'does-not-fit'] }, delayedUpdates: int(0), steadyStepSeconds: { type: 'number', minimum: 0 }, message: { type: 'string' } },
        },
      },
    },
    sp: {
      type: 'object', required: ['ranks', 'seq', 'inputs', 'perRank'],
      description: 'sequence parallelism: the step every one of `ranks` ranks runs, and per rank its positions and ring traffic',
      properties: {
        ranks: int(2), seq: int(1),
        inputs: { type: 'array', items: { type: 'object', required: ['tensor', 'name', 'axis', 'fullShape'], properties: { tensor: int(0), name: { type: 'string' }, axis: int(0), fullShape: { type: 'array', items: int(1) } } } },
        positions: int(0),
        perRank: {
          type: 'array', items: {
            type: 'object', required: ['rank', 'positions', 'ringSendBytes', 'ringWorkspaceBytes'],
            properties: {
              rank: int(0), positions: ints, ringWorkspaceBytes: int(0),
              ringSendBytes: { type: 'object', required: ['attention', 'allReduce'], properties: { attention: int(0), allReduce: int(0) } },
            },
          },
        },
      },
    },
    lpStatus: { type: 'string', description: "an LP the compile needed ended without an optimum (e.g. 'timeLimit'): the min-cut's plan stood in for the placement LP's, or no bound is reported; 'smallerGpu': the placement LP's rounding could not be repaired to fit, and the plan is its placement for a smaller GPU (no bound reported)" },
    bound: {
      type: 'object', required: ['lowerBoundSeconds', 'gapPercent', 'lp'],
      description: "the LP's lower bound on the step time and how far the plan's prediction is above it",
      properties: {
        lowerBoundSeconds: { type: 'number', minimum: 0 }, gapPercent: num, lp: { type: 'object', required: ['rows', 'cols', 'nonzeros', 'status'] },
        keptOnGpu: { type: 'boolean', description: 'the model fits on the GPU and stays there: lowerBoundSeconds is over the plans that keep it there, the GPU\'s own work' },
        anyPlacementLowerBoundSeconds: { type: 'number', minimum: 0, description: 'with keptOnGpu: the bound over every placement' },
        opCostFloor: { type: 'boolean', description: "the plan computes on the CPU, outside the LP's family: lowerBoundSeconds is the op-cost floor over every placement (longest chain of ops at their faster tier; the GPU and CPU sharing the work)" },
        widenedBy: { type: 'array', items: { type: 'string', enum: ['chains', 'split', 'stream', 'cast'] }, description: "the ways the plan leaves the LP's one-level family (recompute through chains, master32 apart from its moments, updates streamed to the GPU, p16 cast on the GPU from master32 copied up): lowerBoundSeconds is the LP's widened by just those" },
        relaxed: { type: 'boolean', description: "the bound LP with its fetch-then-update rows ended without an optimum: lowerBoundSeconds is the same LP's without them (a relaxation: lower, still a bound)" },
      },
    },
    tiers: { type: 'object', required: ['gpu', 'cpu', 'nvme'], properties: { gpu: tierSummary, cpu: tierSummary, nvme: tierSummary } },
    buffers: {
      type: 'array', items: {
        type: 'object', required: ['id', 'tensor', 'tier', 'offsetBytes', 'sizeBytes', 'allocAt', 'freeAt'],
        properties: { id: int(0), tensor: int(0), tier, offsetBytes: int(0), sizeBytes: int(0), allocAt: int(-1), freeAt: int(-1) },
      },
    },
    instructions: {
      type: 'array', items: {
        type: 'object', required: ['id', 'stream', 'kind', 'op', 'inputs', 'outputs', 'waits'],
        properties: {
          id: int(0), stream: { type: 'string', enum: STREAMS }, kind: { type: 'string', enum: ['run', 'copy', 'free'] },
          op: int(-1), inputs: ints, outputs: ints, waits: ints,
        },
      },
    },
    traffic: {
      type: 'object', required: ['h2dBytes', 'd2hBytes', 'nvmeReadBytes', 'nvmeWriteBytes'],
      properties: Object.fromEntries(['h2dBytes', 'd2hBytes', 'nvmeReadBytes', 'nvmeWriteBytes', 'inputBytes'].map((k) => [k, nonNegative])),
    },
    predicted: {
      type: 'object', required: ['stepSeconds', 'streamBusySeconds', 'peakBytes'],
      properties: {
        stepSeconds: nonNegative,
        streamBusySeconds: { type: 'object', required: [...STREAMS], properties: Object.fromEntries(STREAMS.map((k) => [k, nonNegative])) },
        peakBytes: { type: 'object', required: ['gpu', 'cpu', 'nvme'], properties: { gpu: nonNegative, cpu: nonNegative, nvme: nonNegative } },
      },
    },
  },
};

/** Validates `value` against the schema; returns the first problems as `path: message`. */
export function validateSchema(value: unknown, schema: Schema = PLAN_SCHEMA, path = 'plan', out: string[] = []): string[] {
  if (out.length >= 10) return out;
  const typeOf = (v: unknown) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);
  if (schema.const !== undefined && value !== schema.const) { out.push(`${path}: expected ${JSON.stringify(schema.const)}, got ${JSON.stringify(value)}`); return out; }
  if (schema.type) {
    const t = typeOf(value);
    const ok = schema.type === 'integer' ? Number.isInteger(value) : schema.type === 'number' ? t === 'number' && Number.isFinite(value as number) : t === schema.type;
    if (!ok) { out.push(`${path}: expected ${schema.type}, got ${t === 'number' ? String(value) : t}`); return out; }
  }
  if (schema.enum && !schema.enum.includes(value as string)) out.push(`${path}: expected one of ${schema.enum.join(', ')}, got ${JSON.stringify(value)}`);
  if (schema.minimum !== undefined && typeof value === 'number' && value < schema.minimum) out.push(`${path}: ${value} is below the minimum ${schema.minimum}`);
  if (schema.required && typeof value === 'object' && value) for (const k of schema.required) if (!(k in value)) out.push(`${path}: missing '${k}'`);
  if (schema.properties && typeof value === 'object' && value) {
    for (const [k, s] of Object.entries(schema.properties)) if (k in value) validateSchema((value as Record<string, unknown>)[k], s, `${path}.${k}`, out);
  }
  if (schema.items && Array.isArray(value)) for (let i = 0; i < value.length && out.length < 10; i++) validateSchema(value[i], schema.items, `${path}[${i}]`, out);
  return out;
}

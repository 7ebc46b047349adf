// DSL import: a model file (TypeScript, under models/) -> forward IR graph.
//
// Takes the model path, a preset name and optional batch/seq overrides. Gives a
// forward Graph in fp32 whose ops each carry the model line that created them.
// Keeps true: the model file is type-checked (es2022 lib only, strict) before
// any of it runs, and every problem is reported as `file:line:col: message`.
// Cost: ~0.2 s of type-checking, then one stack capture per DSL call.

import { mkdtempSync, readFileSync, rmSync, existsSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, relative, basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { findSourceMap, SourceMap } from 'node:module';
import { createHash } from 'node:crypto';
import { diag, UserError } from '../../src/diagnostics.js';
import { packageRoot } from '../../src/paths.js';
import { cacheDir, remember } from '../../src/cache-dir.js';
import { writeAtomic } from '../../src/atomic-write.js';
import { GraphBuilder, GraphError } from '../ir/graph.js';
import type { Graph, InitSpec, OpAttrs, OpKind, SourceLoc } from '../ir/types.js';
import type { Dsl, Init, Model, PresetBase, Tensor as DslTensor } from './dsl-api.js';

export interface DslOptions {
  preset?: string;
  batch?: number;
  seq?: number;
  /** Numeric preset fields to replace (e.g. { layers: 60 } to scale a model). */
  config?: Record<string, number>;
}

export interface ImportedModel {
  graph: Graph;
  preset: string;
  config: Record<string, unknown>;
  /** What the model does that compiles but is likely a mistake, one line each (file:line:col first): a parameter the loss does not reach. */
  notes?: string[];
}

const API_MODULE = 'tiercut/dsl';

// A model that type-checked is remembered by the hash of its text and of the
// DSL's types, in this process and in a per-user cache directory (which also
// keeps its transpiled module): loading ts-morph and checking costs ~1.5 s, the
// same for every preset and every compile of an unchanged file.
const CACHE_VERSION = 'tiercut-dsl-4';

/** The cache key of model `file` whose text is `src`. */
function cacheKey(file: string, src: string): string {
  const api = readFileSync(join(packageRoot(), 'compiler', 'import', 'dsl-api.ts'), 'utf8');
  return createHash('sha256').update(`${CACHE_VERSION}\0${file}\0${api}\0${src}`).digest('hex').slice(0, 32);
}

const checkedKeys = new Set<string>();

/**
 * Type-checks, then loads, model `file`, its text read once: the cache key,
 * the check and the transpiled module are all of that one text (an edit
 * between two reads had cached the edited code under the old text's key, and
 * loaded code that was never checked).
 */
async function loadChecked(file: string, display: string): Promise<Loaded> {
  const src = readFileSync(file, 'utf8');
  const key = cacheKey(file, src);
  await typeCheck(file, display, src, key);
  return loadModule(file, display, src, key);
}

/** Type-checks a model's text; throws UserError with the first diagnostic as file:line:col: message. */
async function typeCheck(file: string, display: string, src: string, key: string): Promise<void> {
  const dir = cacheDir();
  if (checkedKeys.has(key) || (dir && existsSync(join(dir, `${key}.ok`)))) return;
  await typeCheckUncached(file, display, src);
  checkedKeys.add(key);
  if (dir) remember(dir, `${key}.ok`, file + '\n', isDslEntry, MAX_DSL_ENTRIES);
}

/** The DSL cache's files: `<32 hex>.ok` (checked) and `.mjs` (transpiled); at most MAX_DSL_ENTRIES, the oldest removed first. */
const isDslEntry = (f: string) => /^[0-9a-f]{32}\.(ok|mjs)$/.test(f);
const MAX_DSL_ENTRIES = 256;
/**
 * The most ops a DSL model's forward pass may make (its training step makes
 * ~4x). gpt-1t's forward makes GPT_1T_FORWARD_OPS (llama3-405b's, the most of
 * the bundled presets, 2020); a residual loop of 10k
 * layers (20k forward ops) compiled in 52 s, one of a million ran the
 * compiler out of memory in autodiff.
 */
const MAX_MODEL_OPS = 200_000;
/** The most parameters named one by one in the notes of those the loss does not reach. */
const MAX_NOTES = 5;
const GPT_1T_FORWARD_OPS = 1_797;

async function typeCheckUncached(file: string, display: string, src: string): Promise<void> {
  const { Project, ts } = await import('ts-morph');
  const apiPath = join(packageRoot(), 'compiler', 'import', 'dsl-api.ts');
  const project = new Project({
    compilerOptions: {
      strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler, lib: ['lib.es2022.d.ts'], types: [],
      noEmit: true, paths: { [API_MODULE]: [apiPath] },
    },
    skipAddingFilesFromTsConfig: true,
  });
  const sf = project.createSourceFile(file, src, { overwrite: true });
  project.addSourceFileAtPath(apiPath);
  // syntax errors first: a type error after a syntax error is usually its echo
  const syntax = project.getProgram().getSyntacticDiagnostics(sf);
  const problems = syntax.length ? syntax : project.getPreEmitDiagnostics().filter((d) => d.getSourceFile()?.getFilePath() === sf.getFilePath() || !d.getSourceFile());
  // (re-exports and import() had got past this: a stack trace naming the cache's path when the module loaded)
  const reexports = sf.getExportDeclarations().filter((e) => e.getModuleSpecifierValue() !== undefined);
  const dynamic = sf.getDescendantsOfKind(ts.SyntaxKind.CallExpression).filter((c) => c.getExpression().getKind() === ts.SyntaxKind.ImportKeyword);
  for (const imp of [...sf.getImportDeclarations(), ...reexports, ...dynamic].sort((a, b) => a.getStart() - b.getStart())) {
    const typeOnly = 'isTypeOnly' in imp && imp.isTypeOnly() && imp.getModuleSpecifierValue() === API_MODULE;
    if (!typeOnly) {
      const { line, column } = sf.getLineAndColumnAtPos(imp.getStart());
      throw diag.modelSource(`${display}:${line}:${column}: a model may only import types from '${API_MODULE}' (import type { … } from '${API_MODULE}'), not ${'isTypeOnly' in imp ? (imp.getKindName() === 'ExportDeclaration' ? 're-export' : 'import') : 'load'} other modules`);
    }
  }
  if (problems.length === 0) return;
  const lines = problems.slice(0, 1).map((d) => {
    const start = d.getStart() ?? 0;
    const { line, column } = sf.getLineAndColumnAtPos(start);
    const text = ts.flattenDiagnosticMessageText(d.compilerObject.messageText, ' ');
    return `${display}:${line}:${column}: ${text}`;
  });
  throw diag.modelSource(lines[0] + (problems.length > 1 ? ` (and ${problems.length - 1} more problems)` : ''));
}

/** A loaded model module; `inMemory`: imported from a data: URL (no disk would take it), with its source map, which Node does not keep for such a URL. */
interface Loaded { model: Model<PresetBase>; inMemory?: { url: string; map: SourceMap } }

/**
 * The line a cached module holds just above its source map's comment (which
 * must end the file for Node to find it): its key and the hash of every other
 * byte, checked before the module is imported.
 */
const sealOf = (key: string, rest: string) => `//# tiercut-cache ${key} ${createHash('sha256').update(rest).digest('hex')}\n`;

/** `body` (a transpiled module) with its seal above its last line. */
function sealed(key: string, body: string): string {
  const at = body.lastIndexOf('//# sourceMappingURL=');
  const cut = at >= 0 ? at : body.length;
  return body.slice(0, cut) + sealOf(key, body) + body.slice(cut);
}

/** Whether a cache entry is whole and this key's (not truncated, empty, a directory, another's). */
function isSealed(path: string, key: string): boolean {
  let text: string;
  try { text = readFileSync(path, 'utf8'); } catch { return false; }
  const at = text.lastIndexOf('//# tiercut-cache ');
  const end = text.indexOf('\n', at);
  if (at < 0 || end < 0) return false;
  return text.slice(at, end + 1) === sealOf(key, text.slice(0, at) + text.slice(end + 1));
}

/**
 * Transpiles (or takes from the cache) and imports the module of model text
 * `src`; the inline source map makes stack frames point at the .ts lines. A
 * cache entry that is not whole and this text's (truncated, empty, a
 * directory) is made again (it had failed every later compile of the model,
 * with a stack trace or as the model's own error); the model's own errors
 * are its own (its code runs once).
 */
async function loadModule(file: string, display: string, src: string, key: string): Promise<Loaded> {
  process.setSourceMapsEnabled(true);
  const dir = cacheDir();
  const cached = dir ? join(dir, `${key}.mjs`) : undefined;
  if (cached && existsSync(cached)) {
    if (isSealed(cached, key)) {
      touch(cached);
      return { model: ((await importModel(pathToFileURL(cached).href, file, display)) as { default: Model<PresetBase> }).default };
    }
    // (never imported by this process: checked before any import, so the same URL serves the module made again)
    try { rmSync(cached, { recursive: true, force: true }); } catch { /* written over below, or not cached */ }
  }
  const { ts } = await import('ts-morph');
  const out = ts.transpileModule(src, {
    fileName: file,
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, inlineSourceMap: true, inlineSources: false },
  });
  // the map's "sources" must name the original file so stacks point at it
  let map: ConstructorParameters<typeof SourceMap>[0] | undefined;
  const body = out.outputText.replace(/\/\/# sourceMappingURL=data:application\/json;base64,(\S+)/, (_m, b64: string) => {
    map = { ...JSON.parse(Buffer.from(b64, 'base64').toString('utf8')), sources: [pathToFileURL(file).href], sourceRoot: '' };
    return `//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
  });
  const text = sealed(key, body);
  // the transpiled module goes to the cache, or (no cache, or a disk that
  // would not take it there) to a scratch directory removed after the import;
  // with no disk at all, it is imported from memory (a data: URL)
  let url = cached && remember(dir!, basename(cached), text, isDslEntry, MAX_DSL_ENTRIES) ? pathToFileURL(cached).href : undefined;
  let scratch: string | undefined, inMemory: Loaded['inMemory'];
  if (!url) {
    try {
      scratch = mkdtempSync(join(tmpdir(), 'tiercut-dsl-'));
      const js = join(scratch, basename(file).replace(/\.ts$/, '') + '.mjs');
      writeAtomic(js, text);
      url = pathToFileURL(js).href;
    } catch {
      if (scratch) rmSync(scratch, { recursive: true, force: true });
      scratch = undefined;
      url = `data:text/javascript;base64,${Buffer.from(text).toString('base64')}`;
      if (map) inMemory = { url, map: new SourceMap(map) };
    }
  }
  try {
    const mod = await importModel(url, file, display, inMemory);
    return { model: mod.default as Model<PresetBase>, ...(inMemory ? { inMemory } : {}) };
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * The model's module, imported: its top-level code runs now, and what it
 * throws is the model's error at its line (it had been a stack trace, exit 1).
 */
async function importModel(url: string, file: string, display: string, inMemory?: Loaded['inMemory']): Promise<{ default: unknown }> {
  try {
    return (await import(url)) as { default: unknown };
  } catch (e) {
    const loc = e instanceof Error ? stackLoc(e.stack ?? '', pathToFileURL(file).href, file, inMemory) : undefined;
    throw diag.modelShape(`${loc ? `${display}:${loc.line}:${loc.col}` : display}: while loading the model: ${e instanceof Error ? e.message : `it threw ${String(e)}`}`);
  }
}

/** The model-file position of the innermost stack frame in the model, from a stack's text (source-mapped to the .ts). */
function stackLoc(stack: string, url: string, file: string, inMemory?: Loaded['inMemory']): { line: number; col: number } | undefined {
  for (const line of stack.split('\n')) {
    const at = line.lastIndexOf(url + ':') >= 0 ? line.lastIndexOf(url + ':') + url.length : line.lastIndexOf(file + ':') >= 0 ? line.lastIndexOf(file + ':') + file.length : -1;
    if (at >= 0) {
      const m = /^:(\d+):(\d+)/.exec(line.slice(at));
      if (m) return { line: Number(m[1]), col: Number(m[2]) };
    }
    // a module imported from memory: Node keeps no map for a data: URL, so its frames are mapped here
    if (inMemory) {
      const i = line.lastIndexOf(inMemory.url + ':');
      const m = i >= 0 ? /^:(\d+):(\d+)/.exec(line.slice(i + inMemory.url.length)) : null;
      const o = m ? (inMemory.map.findEntry(Number(m[1]) - 1, Number(m[2]) - 1) as { originalLine?: number; originalColumn?: number }) : undefined;
      if (o?.originalLine !== undefined && o.originalColumn !== undefined) return { line: o.originalLine + 1, col: o.originalColumn + 1 };
    }
  }
  return undefined;
}

/** An entry used now is the last the cache prunes (the cache removes the least recently written first). */
function touch(path: string): void {
  try { const now = new Date(); utimesSync(path, now, now); } catch { /* read-only: pruned sooner, made again then */ }
}

/** (a model with `presets: {}` had been refused as "unknown preset 'undefined' (available: )") */
const NO_PRESETS = 'the model has no presets: give it at least one, e.g. presets: { small: { batch: 8, seq: 1 } }';

export async function importDsl(modelPath: string, opts: DslOptions = {}): Promise<ImportedModel> {
  const file = resolve(modelPath);
  const display = relative(process.cwd(), file) || file;
  if (!existsSync(file)) throw diag.fileNotFound(display, 'model file'); // (a regular file: src/compile.ts checkCompileOptions)
  const { model, inMemory } = await loadChecked(file, display);
  const { build, presets } = readModel(model, display);
  const names = Object.keys(presets);
  if (names.length === 0) throw diag.modelExport(display, NO_PRESETS);
  const preset = opts.preset ?? names[0];
  if (!Object.prototype.hasOwnProperty.call(presets, preset)) throw diag.unknownPreset(display, preset, names);
  let cfg: PresetBase;
  try { cfg = { ...presets[preset] }; } catch (e) { throw diag.modelExport(display, `reading preset '${preset}': ${e instanceof Error ? e.message : String(e)}`); }
  for (const [k, v] of Object.entries(opts.config ?? {})) {
    const was = (cfg as unknown as Record<string, unknown>)[k];
    if (typeof was !== 'number') throw diag.modelExport(display, `preset '${preset}' has no numeric field '${k}' to override`);
    // (an override keeps the field's kind: layers=2.5 or layers=-1 had built a model all the same, the loop rounding or skipping)
    if (!Number.isFinite(v) || (Number.isInteger(was) && !Number.isInteger(v)) || (was > 0 && v <= 0))
      throw diag.modelExport(display, `preset '${preset}': '${k}' is ${Number.isInteger(was) ? 'a whole number' : 'a number'}${was > 0 ? ' above 0' : ''} (${was}), got ${v}`);
    (cfg as unknown as Record<string, number>)[k] = v;
  }
  if (opts.batch !== undefined) cfg.batch = opts.batch;
  if (opts.seq !== undefined) cfg.seq = opts.seq;
  const name = `${basename(file, '.ts')}:${preset}${Object.entries(opts.config ?? {}).map(([k, v]) => `,${k}=${v}`).join('')}`;
  const builder = new DslBuilder(name, file, display, inMemory);
  // a message's start: the file, and the line where one is known
  const where = (l?: { line: number; col: number }) => (l ? `${display}:${l.line}:${l.col}: ` : `${display}: `);
  let loss: DslTensor;
  try {
    loss = build.call(model, builder, cfg);
  } catch (e) {
    if (e instanceof UserError) throw e;
    // (a tensor's own checks, shape and dimensions, say no line: the model's call that made it; a path
    // with a space had been tested as having none, and the line said twice)
    if (e instanceof Error) {
      const loc = builder.callerLoc(e);
      if (e instanceof GraphError && (e.loc || !loc)) throw diag.modelShape(e.message);
      throw diag.modelShape(`${where(loc)}${e.message}`);
    }
    // (a thrown string has no stack: the line of the model's last nn call, said as such; it had named no line)
    const last = builder.lastLoc;
    throw diag.modelShape(`${where(last)}build() threw ${typeof e === 'string' ? `'${e}'` : String(e)}, not an Error${last ? ' (the line is its last nn call before)' : ''}`);
  }
  // (checked here, outside the model's code: the message had said line 0:0)
  if (!builder.made(loss)) {
    const last = builder.lastLoc;
    throw diag.modelShape(`${where(last)}build() must return the loss, a tensor made by the model's nn calls; got ${loss === undefined ? 'undefined' : typeof loss}${last ? ' (the line is its last nn call)' : ''}`);
  }
  const lossId = builder.idOf(loss);
  const t = builder.g.tensors[lossId];
  // (at the line of the op that made it: the message had named no line)
  const maker = builder.g.ops.find((o) => o.outputs.includes(lossId))?.loc;
  const at = where(maker && 'line' in maker ? maker : undefined);
  if (t.shape.length !== 0) throw diag.modelShape(`${at}build() must return the scalar loss, got a tensor of shape [${t.shape.join(',')}]`);
  // (a parameter returned as the loss had lost its role and trained on 0; an input had failed the plan's own check, a model of no ops autodiff)
  if (t.role !== 'activation') throw diag.modelShape(`${display}: build() must return a loss computed by the model's nn ops, got the ${t.role === 'input' ? 'input' : 'parameter'} '${t.name}' itself`);
  // (a loss no parameter reaches had compiled and trained nothing, its loss
  // the same every step; one the loss does not reach, silently)
  const reached = builder.reachedFrom(lossId);
  const params = builder.g.tensors.filter((x) => x.role === 'param16');
  if (!params.some((p) => reached.has(p.id))) throw diag.modelShape(`${at}the loss build() returns depends on no parameter of the model (${params.length} made), so nothing would train`);
  const unreached = params.filter((p) => !reached.has(p.id));
  const notes = unreached.slice(0, MAX_NOTES).map((p) => `${where(builder.paramLoc.get(p.id))}parameter '${p.name}' does not reach the loss: it gets no gradient from it`);
  if (unreached.length > MAX_NOTES) notes.push(`${display}: and ${unreached.length - MAX_NOTES} more parameters that do not reach the loss`);
  builder.g.tensors[lossId] = { ...t, role: 'loss' };
  return { graph: builder.g.build(lossId, 'fp32'), preset, config: cfg as unknown as Record<string, unknown>, ...(notes.length ? { notes } : {}) };
}

interface Handle extends DslTensor { readonly id: number }

class DslBuilder implements Dsl {
  readonly g: GraphBuilder;
  /** Where each parameter was made (its notes name the line). */
  readonly paramLoc = new Map<number, { line: number; col: number }>();
  private readonly scopes: string[] = [];
  private counter = 0;

  private readonly url: string;

  constructor(name: string, private readonly file: string, private readonly display: string, private readonly inMemory?: Loaded['inMemory']) {
    this.g = new GraphBuilder(name);
    this.url = pathToFileURL(file).href;
  }

  /** The model-file position of the innermost stack frame in the model (of `err`, or of the current call). */
  callerLoc(err?: Error): { line: number; col: number } | undefined {
    if (!err) { const here = this.callSiteLoc(); if (here !== false) return here; }
    return stackLoc((err ?? new Error()).stack ?? '', this.url, this.file, this.inMemory);
  }

  /** Model-file positions by transpiled position ("line:col" in the loaded module), for callSiteLoc. */
  private readonly mapped = new Map<string, { line: number; col: number } | null>();

  /**
   * callerLoc of the current call without formatting a stack: the same frames
   * (a new Error's, within Error.stackTraceLimit) read as V8 call sites, and
   * the first one whose source-mapped position is in the model file — what
   * Node's source-mapped stack text would show, at a fraction of its cost (one
   * stack per DSL call adds up: ~3000 ops for gpt2-1.5b). False when call
   * sites are unavailable or Error.prepareStackTrace is someone else's (the
   * caller then parses the stack text).
   */
  private callSiteLoc(): { line: number; col: number } | undefined | false {
    const prev = Error.prepareStackTrace;
    // another stack formatter (a test runner's source-map support) decides what the text says: let it
    // (Node's own, with source maps enabled, is what this reproduces; Node 20+ installs it as ErrorPrepareStackTrace)
    if (prev !== undefined && prev.name !== 'ErrorPrepareStackTrace') return false;
    let sites: NodeJS.CallSite[] | undefined;
    try {
      Error.prepareStackTrace = (_e, s) => s;
      sites = new Error().stack as unknown as NodeJS.CallSite[];
    } catch {
      return false;
    } finally {
      Error.prepareStackTrace = prev;
    }
    if (!Array.isArray(sites)) return false;
    const url = this.url;
    for (const site of sites) {
      const name = site.getFileName() ?? '';
      const line = site.getLineNumber(), col = site.getColumnNumber();
      if (line === null || col === null) continue;
      const map = !name ? undefined : name === this.inMemory?.url ? this.inMemory.map : findSourceMap(name);
      if (!map) {
        // an unmapped frame shows its own position
        if (name === url || name === this.file) return { line, col };
        continue;
      }
      const key = `${name}:${line}:${col}`;
      let at = this.mapped.get(key);
      if (at === undefined) {
        const e = map.findEntry(line - 1, col - 1) as { originalSource?: string; originalLine?: number; originalColumn?: number };
        const src = e.originalSource;
        at = src && e.originalLine !== undefined && e.originalColumn !== undefined && (src === url || src === this.file) ? { line: e.originalLine + 1, col: e.originalColumn + 1 } : null;
        // a frame mapped elsewhere shows that file; one mapped nowhere shows its own position
        if (at === null && !(src && e.originalLine !== undefined && e.originalColumn !== undefined) && (name === url || name === this.file)) at = { line, col };
        this.mapped.set(key, at);
      }
      if (at) return at;
    }
    return undefined;
  }

  /** The model-file position of the last nn call (for a throw that carries no stack). */
  lastLoc: { line: number; col: number } | undefined;

  private loc(): { file: string; line: number; col: number } {
    const l = this.callerLoc();
    if (l) this.lastLoc = l;
    return { file: this.display, line: l?.line ?? 0, col: l?.col ?? 0 };
  }

  /** Whether t is a tensor this builder made. */
  made(t: unknown): boolean {
    const id = (t as Handle | undefined)?.id;
    return typeof id === 'number' && this.g.tensors[id]?.name === (t as Handle).name;
  }

  idOf(t: DslTensor): number {
    if (!this.made(t)) {
      const l = this.loc();
      throw diag.modelShape(`${this.display}:${l.line}:${l.col}: not a tensor made by this build() call (a tensor kept from an earlier call, e.g. in module-level state, is not one: compile and fit call build() more than once)`);
    }
    return (t as Handle).id;
  }

  private handle(id: number): Handle {
    const t = this.g.tensors[id];
    return { id, name: t.name, shape: t.shape, dtype: t.dtype === 'i32' ? 'i32' : 'f32' };
  }

  private qualify(name: string): string {
    return [...this.scopes, name].join('.');
  }

  private emit(kind: OpKind, inputs: DslTensor[], attrs: OpAttrs = {}, first = 0): Handle {
    const loc = this.loc();
    // (a plan is JSON: a NaN or an infinity would be written as null)
    for (const [k, v] of Object.entries(attrs)) if (typeof v === 'number' && !Number.isFinite(v)) throw diag.modelShape(`${this.display}:${loc.line}:${loc.col}: ${kind}: ${k} must be a finite number, got ${v}`);
    // (a negative eps had compiled, then stopped the run on a NaN gradient)
    if ((kind === 'layerNorm' || kind === 'rmsNorm') && !((attrs.eps ?? 0) >= 0)) throw diag.modelShape(`${this.display}:${loc.line}:${loc.col}: ${kind}: eps must be >= 0, got ${attrs.eps}`);
    // (a loop of a million layers had run the compiler out of memory, a V8 abort and a stack dump, after minutes)
    if (this.g.ops.length >= MAX_MODEL_OPS) throw diag.modelShape(`${this.display}:${loc.line}:${loc.col}: the model makes more than ${MAX_MODEL_OPS} ops in its forward pass; tiercut compiles models up to that (gpt-1t's makes ${GPT_1T_FORWARD_OPS}); fewer layers?`);
    const base = `${this.qualify(kind)}#${this.counter++}`;
    const names = [base, `${base}.aux1`, `${base}.aux2`];
    const outs = this.g.op(kind, inputs.map((t) => this.idOf(t)), attrs, { names, role: 'activation' }, 'forward', loc);
    return this.handle(outs[first].id);
  }

  input(name: string, shape: readonly number[], dtype: 'f32' | 'i32' = 'f32'): DslTensor {
    // (a second input of one name had been renamed x#1, the name --data must then use)
    // (names are looked up, not searched: a scan per declaration had made 40k parameters take 23 s)
    this.checkName('input', name);
    return this.handle(this.g.tensor({ name, shape, dtype, role: 'input' }).id);
  }

  param(name: string, shape: readonly number[], init: Init = { normal: 0.02 }): DslTensor {
    const full = this.qualify(name);
    this.checkName('parameter', full);
    const spec: InitSpec = 'normal' in init ? { kind: 'normal', std: init.normal, mean: init.mean ?? 0 } : { kind: 'constant', value: init.constant };
    const values = spec.kind === 'normal' ? [spec.std, spec.mean ?? 0] : spec.kind === 'constant' ? [spec.value] : [];
    // (finite in fp32: 1e40 had compiled, then stopped the run on an inf gradient)
    if (values.some((v) => typeof v !== 'number' || !Number.isFinite(Math.fround(v)))) {
      const l = this.loc();
      throw diag.modelShape(`${this.display}:${l.line}:${l.col}: parameter '${full}': its init needs finite numbers, got ${JSON.stringify(init, (_, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))}`);
    }
    const id = this.g.tensor({ name: full, shape, dtype: 'f32', role: 'param16', persistent: true, param: full, init: spec }).id;
    this.paramLoc.set(id, this.loc());
    return this.handle(id);
  }

  /** An input's or parameter's name: unused, and one a checkpoint or --data file can hold. */
  private checkName(what: 'input' | 'parameter', name: string): void {
    const id = this.g.idOf(name);
    // (a parameter named so trained, then its checkpoint was refused at the run's end; an input could not be given)
    const why = name === '__metadata__' ? 'the name is the safetensors format\'s own key (--data, --weights and --save files), so no tensor can be named so'
      : id === undefined ? undefined
      : this.g.tensors[id].role === 'activation' ? `the name is already taken by an op's output (the DSL names those KIND#N)`
      : 'the name is already taken by an input or parameter of the model';
    if (!why) return;
    const l = this.loc();
    throw diag.modelShape(`${this.display}:${l.line}:${l.col}: ${what} '${name}': ${why}`);
  }

  /** The tensors tensor `id` is computed from, itself included, through the ops made so far. */
  reachedFrom(id: number): Set<number> {
    const made = new Map<number, readonly number[]>();
    for (const o of this.g.ops) for (const out of o.outputs) made.set(out, o.inputs);
    const seen = new Set<number>([id]);
    for (const stack = [id]; stack.length;) for (const i of made.get(stack.pop()!) ?? []) if (!seen.has(i)) { seen.add(i); stack.push(i); }
    return seen;
  }

  matmul(a: DslTensor, b: DslTensor, opts: { transB?: boolean } = {}): DslTensor { return this.emit('matmul', [a, b], { transB: opts.transB ?? false }); }
  add(a: DslTensor, b: DslTensor): DslTensor { return this.emit('add', [a, b]); }
  mul(a: DslTensor, b: DslTensor): DslTensor { return this.emit('mul', [a, b]); }
  gelu(x: DslTensor, opts: { erf?: boolean } = {}): DslTensor { return this.emit('gelu', [x], opts.erf ? { erf: true } : {}); }
  silu(x: DslTensor): DslTensor { return this.emit('silu', [x]); }
  rmsNorm(x: DslTensor, w: DslTensor, eps = 1e-5): DslTensor { return this.emit('rmsNorm', [x, w], { eps }); }
  rope(x: DslTensor, heads: number, theta = 10000): DslTensor { return this.emit('rope', [x], { heads, theta }); }
  attention(q: DslTensor, k: DslTensor, v: DslTensor, opts: { heads: number; kvHeads?: number; causal: boolean }): DslTensor {
    return this.emit('attention', [q, k, v], { heads: opts.heads, kvHeads: opts.kvHeads ?? opts.heads, causal: opts.causal });
  }
  layerNorm(x: DslTensor, w: DslTensor, b: DslTensor, eps = 1e-5): DslTensor { return this.emit('layerNorm', [x, w, b], { eps }); }
  softmax(x: DslTensor): DslTensor { return this.emit('softmax', [x]); }
  causalAttention(qkv: DslTensor, heads: number): DslTensor { return this.emit('causalAttention', [qkv], { heads }); }
  embedding(ids: DslTensor, table: DslTensor): DslTensor { return this.emit('embedding', [ids, table]); }
  crossEntropy(logits: DslTensor, targets: DslTensor): DslTensor { return this.emit('crossEntropy', [logits, targets]); }
  reshape(x: DslTensor, shape: readonly number[]): DslTensor { return this.emit('reshape', [x], { shape: [...shape] }); }
  transpose(x: DslTensor, perm: readonly number[]): DslTensor { return this.emit('transpose', [x], { perm: [...perm] }); }

  scope<R>(name: string, body: () => R): R {
    this.scopes.push(name);
    try { return body(); } finally { this.scopes.pop(); }
  }
}

/**
 * A model's build and presets, read once (a getter that throws is the model's
 * error, one line; `presets: null` had passed as an object and failed with a
 * stack trace).
 */
function readModel(model: unknown, display: string): { build: Model<PresetBase>['build']; presets: Record<string, PresetBase> } {
  const bad = () => diag.modelExport(display, "the default export must be a Model: { presets, build(nn, cfg) }");
  if (!model || typeof model !== 'object') throw bad();
  let build: unknown, presets: unknown;
  try {
    ({ build, presets } = model as Record<string, unknown>);
  } catch (e) {
    throw diag.modelExport(display, `reading the model's build or presets: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof build !== 'function' || !presets || typeof presets !== 'object') throw bad();
  return { build: build as Model<PresetBase>['build'], presets: presets as Record<string, PresetBase> };
}

/** The preset names of a model file (type-checked and loaded, nothing built). */
export async function modelPresets(modelPath: string): Promise<string[]> {
  const file = resolve(modelPath);
  const display = relative(process.cwd(), file) || file;
  if (!existsSync(file)) throw diag.fileNotFound(display, 'model file'); // (a regular file: src/compile.ts checkCompileOptions)
  const { presets } = readModel((await loadChecked(file, display)).model, display);
  if (Object.keys(presets).length === 0) throw diag.modelExport(display, NO_PRESETS);
  return Object.keys(presets);
}

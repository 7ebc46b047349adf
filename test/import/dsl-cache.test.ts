// The DSL model cache (src/cache-dir.ts, compiler/import/dsl.ts) on a disk that
// lies: each compile here runs with its own temp directory, so its own cache.
// A damaged entry is made again, never blamed on the model nor fatal; the entry
// just written is never pruned; the model's text is read once, so the cache
// holds the module of the text its key names.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const bin = resolve('bin/tiercut.js');

/** A work dir with its own copy of the GPT model and its own TMPDIR (so its own cache). */
function work(): { dir: string; cache: () => string; compile: (...args: string[]) => ReturnType<typeof spawnSync> } {
  const dir = mkdtempSync(join(tmpdir(), 'tiercut-dslcache-'));
  mkdirSync(join(dir, 'm'));
  mkdirSync(join(dir, 'tmp'));
  cpSync('models/gpt.ts', join(dir, 'm', 'gpt.ts'));
  const env = { ...process.env, TMPDIR: join(dir, 'tmp') };
  const compile = (...args: string[]) => spawnSync(process.execPath, [bin, 'compile', 'm/gpt.ts', '--preset', 'tiny', ...args], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  const cache = () => join(dir, 'tmp', readdirSync(join(dir, 'tmp')).find((f) => f.startsWith('tiercut-cache-'))!);
  return { dir, cache, compile };
}

const ops = (file: string) => JSON.parse(readFileSync(file, 'utf8')).graph.ops.length as number;

describe('the DSL cache', () => {
  it('a truncated, empty or directory entry is made again: the same plan, no error (each had failed every later compile)', () => {
    const w = work();
    try {
      expect(w.compile('-o', 'a.json').status).toBe(0);
      const mjs = () => readdirSync(w.cache()).find((f) => f.endsWith('.mjs'))!;
      const entry = join(w.cache(), mjs());
      const good = readFileSync(entry, 'utf8');
      for (const damage of [() => writeFileSync(entry, good.slice(0, 3000)), () => writeFileSync(entry, ''), () => { rmSync(entry); mkdirSync(entry); }]) {
        damage();
        const r = w.compile('-o', 'b.json');
        expect(r.status, String(r.stderr)).toBe(0);
        expect(String(r.stderr)).toBe('');
        expect(readFileSync(join(w.dir, 'b.json'), 'utf8')).toBe(readFileSync(join(w.dir, 'a.json'), 'utf8'));
        expect(readFileSync(entry, 'utf8')).toBe(good); // made again in place
      }
    } finally {
      rmSync(w.dir, { recursive: true, force: true });
    }
  });

  it('the entry just written is never pruned, even where every other entry is dated later (the compile had failed: module not found)', () => {
    const w = work();
    try {
      expect(w.compile('-o', 'a.json').status).toBe(0);
      const later = new Date(Date.now() + 3600_000);
      for (let i = 0; i < 256; i++) {
        const f = join(w.cache(), `${i.toString(16).padStart(32, '0')}.mjs`);
        writeFileSync(f, 'export default 0;\n');
        utimesSync(f, later, later);
      }
      for (const f of readdirSync(w.cache()).filter((x) => /^[0-9a-f]{32}\.(ok|mjs)$/.test(x) && !x.startsWith('0000'))) rmSync(join(w.cache(), f));
      const r = w.compile('-o', 'b.json');
      expect(r.status, String(r.stderr)).toBe(0);
      expect(ops(join(w.dir, 'b.json'))).toBe(ops(join(w.dir, 'a.json')));
      expect(readdirSync(w.cache()).filter((x) => /^[0-9a-f]{32}\.(ok|mjs)$/.test(x)).length).toBeLessThanOrEqual(256);
    } finally {
      rmSync(w.dir, { recursive: true, force: true });
    }
  });

  it('a model edited while it compiles: its cache entry is the text that compiled (the edited code had been cached under the old text\'s key)', () => {
    const w = work();
    try {
      // a hook standing in for an editor: the model is rewritten (2 layers -> 5) on every read after the first
      const hook = join(w.dir, 'edit-hook.cjs');
      writeFileSync(hook, [
        "const fs = require('fs'), path = require('path'), mod = require('module');",
        "const target = path.resolve('m/gpt.ts'); let n = 0; const read = fs.readFileSync;",
        'fs.readFileSync = function (p, ...a) {',
        "  if (typeof p === 'string' && path.resolve(p) === target && ++n >= 2) fs.writeFileSync(target, read.call(fs, target, 'utf8').replace('tiny: { vocab: 96, layers: 2,', 'tiny: { vocab: 96, layers: 5,'));",
        '  return read.call(this, p, ...a);',
        '};',
        'mod.syncBuiltinESMExports();',
      ].join('\n'));
      const env = { ...process.env, TMPDIR: join(w.dir, 'tmp') };
      const edited = spawnSync(process.execPath, ['-r', hook, bin, 'compile', 'm/gpt.ts', '--preset', 'tiny', '-o', 'e.json'], { cwd: w.dir, env, encoding: 'utf8', timeout: 60_000 });
      expect(edited.status, edited.stderr).toBe(0);
      cpSync('models/gpt.ts', join(w.dir, 'm', 'gpt.ts')); // the edit undone
      expect(w.compile('-o', 'after.json').status).toBe(0);
      const fresh = spawnSync(process.execPath, [bin, 'compile', 'models/gpt.ts', '--preset', 'tiny', '-o', join(w.dir, 'fresh.json')], { encoding: 'utf8', timeout: 60_000 });
      expect(fresh.status).toBe(0);
      expect(ops(join(w.dir, 'after.json'))).toBe(ops(join(w.dir, 'fresh.json')));
      expect(ops(join(w.dir, 'e.json'))).toBe(ops(join(w.dir, 'fresh.json'))); // the text read first is the one compiled
    } finally {
      rmSync(w.dir, { recursive: true, force: true });
    }
  });

  it('a model whose own code throws runs once per compile, cached or not (its error had been taken for a damaged entry: run twice, the entry made again)', () => {
    const w = work();
    try {
      const src = readFileSync(join(w.dir, 'm', 'gpt.ts'), 'utf8');
      writeFileSync(join(w.dir, 'm', 'gpt.ts'), src.replace('const gpt: Model<GptConfig> = {', [
        'const host = (globalThis as unknown as { process: { stderr: { write(s: string): void }; env: Record<string, string | undefined> } }).process;',
        "host.stderr.write('TOP-LEVEL RUN\\n');",
        "if (host.env.THROW) throw new Error('the model refuses');",
        'const gpt: Model<GptConfig> = {',
      ].join('\n')));
      expect(w.compile('-o', 'a.json').status).toBe(0); // cached now
      const r = spawnSync(process.execPath, [bin, 'compile', 'm/gpt.ts', '--preset', 'tiny', '-o', 'b.json'], { cwd: w.dir, env: { ...process.env, TMPDIR: join(w.dir, 'tmp'), THROW: '1' }, encoding: 'utf8', timeout: 60_000 });
      expect(r.status).not.toBe(0);
      expect(r.stderr.match(/TOP-LEVEL RUN/g)?.length).toBe(1);
      expect(r.stderr).toMatch(/the model refuses/);
    } finally {
      rmSync(w.dir, { recursive: true, force: true });
    }
  });
});

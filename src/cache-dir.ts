// The per-user cache directory (in the system's temp directory, mode 0700,
// used only when it is owned by this user and writable by nobody else) and
// its entries: each written whole (atomic-write.ts) or not at all — a cache
// that cannot be written (a full disk) is no cache, never an error — and at
// most a number of them of each kind, the oldest removed first. Holds what
// compile may reuse across processes: type-checked and transpiled DSL models
// (compiler/import/dsl.ts) and solved LPs (compiler/partition/lp-cache.ts).

import { chmodSync, mkdirSync, readdirSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeAtomic } from './atomic-write.js';

/** The per-user cache directory, or undefined when it is not safely ours. */
export function cacheDir(): string | undefined {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  const dir = join(tmpdir(), `tiercut-cache-${uid ?? 'user'}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = statSync(dir);
    if (uid !== undefined && (st.uid !== uid || (st.mode & 0o022) !== 0)) return undefined;
    // (a directory made before, readable by others: the models' transpiled sources are this user's alone)
    if ((st.mode & 0o077) !== 0) chmodSync(dir, 0o700);
    return dir;
  } catch {
    return undefined;
  }
}

/**
 * Writes entry `name` of the cache `dir`, then removes the oldest entries for
 * which `mine` holds beyond `max`. False (and nothing written) when the disk
 * would not take it.
 */
export function remember(dir: string, name: string, text: string | Uint8Array, mine: (name: string) => boolean, max: number): boolean {
  try {
    writeAtomic(join(dir, name), text);
  } catch {
    return false;
  }
  try {
    // (never the entry just written: a cache of entries dated later than now had pruned it, and its reader failed)
    const entries = readdirSync(dir).filter((f) => mine(f) && f !== name);
    max -= 1;
    if (entries.length > max) {
      const aged = entries.map((f) => ({ f, t: statSync(join(dir, f)).mtimeMs })).sort((a, b) => a.t - b.t || (a.f < b.f ? -1 : 1));
      for (const { f } of aged.slice(0, entries.length - max)) unlinkSync(join(dir, f));
    }
  } catch {
    // another process pruned first
  }
  return true;
}

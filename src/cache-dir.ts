// The per-user cache directory (in the system's temp directory, mode 0700,
// used only when it is owned by this user and writable by nobody else) and an
// atomic file write into it (temp file, then rename). Holds what compile may
// reuse across processes: type-checked and transpiled DSL models
// (compiler/import/dsl.ts) and solved LPs (compiler/partition/lp-cache.ts).

import { mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';

/** The per-user cache directory, or undefined when it is not safely ours. */
export function cacheDir(): string | undefined {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  const dir = join(tmpdir(), `tiercut-cache-${uid ?? 'user'}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = statSync(dir);
    if (uid !== undefined && (st.uid !== uid || (st.mode & 0o022) !== 0)) return undefined;
    return dir;
  } catch {
    return undefined;
  }
}

/** Writes `path` whole or not at all (a reader never sees half a file). */
export function writeAtomic(path: string, text: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}-${threadId}`; // threads of one process (test runners) write apart
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

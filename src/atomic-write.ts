// Files written whole or not at all. A plan, trace or profile goes to a
// temporary file beside its target, is flushed to the disk and renamed over
// it: a full or failing disk (ENOSPC, EFBIG, EIO) leaves the old file as it
// was and no temporary file behind, and the caller says so in one line. A
// target that is not a regular file (/dev/stdout, a pipe) is written through.

import { closeSync, fsyncSync, openSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import { diag } from './diagnostics.js';

/** Writes `path` whole or not at all (a reader never sees half a file); throws the OS error, leaving nothing behind. */
export function writeAtomic(path: string, text: string | Uint8Array, flush = false): void {
  const tmp = `${path}.tmp-${process.pid}-${threadId}`; // threads of one process (test runners) write apart
  try {
    writeFileSync(tmp, text);
    if (flush) { const fd = openSync(tmp, 'r'); try { fsyncSync(fd); } finally { closeSync(fd); } }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

/** A user's output file (`what`: "the plan", "the trace"): atomic and flushed; a failure is one UserError line naming the file and the OS error. */
export function writeOutput(path: string, text: string, what: string): void {
  try {
    let special = false;
    try { special = !statSync(path).isFile(); } catch { /* absent: a new file */ }
    if (special) writeFileSync(path, text);
    else writeAtomic(path, text, true);
  } catch (e) {
    throw diag.cannotWrite(`cannot write ${what} to ${path}: ${osReason(e)}; nothing was written`);
  }
}

/** An OS error as "EFBIG (file too large)". */
export function osReason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code ? `${err.code} (${String(err.message).replace(/^\w+: /, '').replace(/, \w+ .*$/, '')})` : String(err?.message ?? e);
}

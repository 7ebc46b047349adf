// Files written whole or not at all. A plan, trace, profile or checkpoint goes to a
// temporary file beside its target, is flushed to the disk and renamed over
// it: a full or failing disk (ENOSPC, EFBIG, EIO) leaves the old file as it
// was and no temporary file behind, and the caller says so in one line. A
// target that is not a regular file (/dev/stdout, a pipe) is written through.

import { type Stats, accessSync, chmodSync, closeSync, constants, fsyncSync, lstatSync, openSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { threadId } from 'node:worker_threads';
import { diag } from './diagnostics.js';

/** A file's bytes: one text or buffer, or several buffers written one after the other (no copy into one). */
export type FileBytes = string | Uint8Array | readonly Uint8Array[];

function writeAll(fd: number, bytes: FileBytes): void {
  for (const part of typeof bytes === 'string' || bytes instanceof Uint8Array ? [bytes] : bytes) {
    const b = typeof part === 'string' ? Buffer.from(part) : part;
    for (let at = 0; at < b.byteLength;) at += writeSync(fd, b, at, b.byteLength - at);
  }
}

/**
 * The temporary file beside `path` (threads of one process, test runners,
 * write apart); its name cut to 200 bytes of the target's, so that a target
 * named near the 255-byte limit has one (ENAMETOOLONG had refused it).
 */
function tmpPath(path: string): string {
  const name = Buffer.from(basename(path)).subarray(0, 200).toString('utf8').replace(/\uFFFD+$/, '');
  return join(dirname(path), `${name}.tmp-${process.pid}-${threadId}`);
}

/** Writes `path` whole or not at all (a reader never sees half a file); with `flush`, on the disk before the rename; throws the OS error, leaving nothing behind. */
export function writeAtomic(path: string, bytes: FileBytes, flush = false): void {
  const tmp = tmpPath(path);
  try {
    const fd = openSync(tmp, 'w');
    try {
      writeAll(fd, bytes);
      if (flush) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

/**
 * Where a write to `path` lands: through symbolic links (a dangling one too:
 * the file it names is made), by the OS's own resolution (`..` after a link
 * is the link target's parent), into the directory that will hold the file.
 */
function writeTarget(path: string): string {
  let at = path;
  for (let hops = 0; hops < 40; hops++) {
    let link: string;
    try {
      if (!lstatSync(at).isSymbolicLink()) break;
      link = readlinkSync(at);
    } catch { break; /* absent: a new file */ }
    at = isAbsolute(link) ? link : join(dirname(at), link);
  }
  try { return realpathSync.native(at); } catch { /* not there yet */ }
  try { return join(realpathSync.native(dirname(at)), basename(at)); } catch { return resolve(at); }
}

/**
 * Whether `path` can be written later (before work whose result goes there:
 * run's checkpoint, written after every step, had been lost with a whole run
 * to a missing directory): its temporary file made and removed beside where
 * writeOutput will write (a link's target's directory); a directory in its
 * place refused; a device or pipe checked for write access. Throws
 * writeOutput's one line.
 */
export function checkWritable(path: string, what: string): void {
  try {
    let st: Stats | undefined;
    try { st = statSync(path); } catch { /* absent: a new file */ }
    if (st?.isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
    // (a device or a pipe is written through, not beside: /dev/null had been probed with a file made in /dev)
    if (st && !st.isFile()) { accessSync(path, constants.W_OK); return; }
    const tmp = tmpPath(writeTarget(path));
    closeSync(openSync(tmp, 'w'));
    rmSync(tmp, { force: true });
  } catch (e) {
    throw diag.cannotWrite(`cannot write ${what} to ${path}: ${osReason(e)}${inDirectory(e, path)}; nothing was done`);
  }
}

/** Where permission is refused: the directory, which the temporary file is made in (the file itself may be writable: the message had pointed at it). */
function inDirectory(e: unknown, path: string): string {
  const code = (e as NodeJS.ErrnoException).code;
  try { if (!statSync(path).isFile()) return ''; } catch { /* a new file */ }
  return code === 'EACCES' || code === 'EPERM' ? ` in its directory ${dirname(writeTarget(path))} (a new file is made there and renamed over it)` : '';
}

/**
 * A user's output file (`what`: "the plan", "the checkpoint"): atomic and
 * flushed; a failure is one UserError line naming the file and the OS error.
 * A symbolic link is written through to its target, a dangling one's made
 * (the rename had replaced the link with a file and left the target as it
 * was), and a file keeps its permission bits (not set-id ones).
 */
export function writeOutput(path: string, bytes: FileBytes, what: string): void {
  try {
    let st: Stats | undefined;
    try { st = statSync(path); } catch { /* absent: a new file */ }
    if (st && !st.isFile()) { const fd = openSync(path, 'w'); try { writeAll(fd, bytes); } finally { closeSync(fd); } return; }
    const target = writeTarget(path);
    writeAtomic(target, bytes, true);
    if (st) chmodSync(target, st.mode & 0o1777);
  } catch (e) {
    throw diag.cannotWrite(`cannot write ${what} to ${path}: ${osReason(e)}${inDirectory(e, path)}; nothing was written`);
  }
}

/** An OS error as "EFBIG (file too large)". */
export function osReason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  // (the syscall's name and path taken out: "EFBIG (file too large, write)" had kept the ", write")
  return err.code ? `${err.code} (${String(err.message).replace(/^\w+: /, '').replace(/, \w+( .*)?$/, '')})` : String(err?.message ?? e);
}

/**
 * Refuses two of a command's files that are one file (`run --save` onto
 * PLAN had replaced the plan with a checkpoint, `--save` and `--trace` alike
 * had kept the last written): `files` are [what, path], path undefined where
 * not given. An output may be read as an input first only where the command
 * allows it (run --weights A --save A continues a checkpoint), so only the
 * pairs given here are checked.
 */
export function checkDistinct(files: readonly (readonly [string, string | undefined])[]): void {
  const seen = new Map<string, string>();
  for (const [what, path] of files) {
    if (path === undefined) continue;
    // (a device given twice, /dev/null for both, is fine: nothing is kept there)
    try { if (!statSync(path).isFile()) continue; } catch { /* absent: a new file */ }
    const at = writeTarget(path);
    const before = seen.get(at);
    if (before !== undefined) throw diag.usage(`${before} and ${what} are the same file (${path}); give each its own`);
    seen.set(at, what);
  }
}

// Sizes in and out: parsing `64MB` (10^6), `32GiB` (2^30) or plain bytes (0: no
// such tier) from the command line, and formatting byte counts for messages.
import { diag } from './diagnostics.js';

const UNITS: Record<string, number> = {
  '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40,
};

export function parseSize(flag: string, text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m?.[2].toLowerCase();
  if (!m || unit === undefined || !Object.hasOwn(UNITS, unit)) throw diag.badSize(flag, text);
  // (a byte count is whole: '4096.5' had been taken as 4097)
  if (UNITS[unit] === 1 && !Number.isInteger(Number(m[1]))) throw diag.badSize(flag, text);
  const bytes = Math.round(Number(m[1]) * UNITS[unit]);
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw diag.badSize(flag, text);
  return bytes;
}

/** Bytes in binary units for messages: "1.50 GiB", "512 B" (1048575 is "1.00 MiB", not "1024.00 KiB"). */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n, u = 0;
  // (the unit chosen after rounding: a value just under a unit had printed as 1024.00 of the one below)
  while (u < units.length - 1 && Math.abs(Number(v.toFixed(u === 0 ? 0 : 2))) >= 1024) { v /= 1024; u++; }
  return `${v.toFixed(u === 0 ? 0 : 2)} ${units[u]}`;
}

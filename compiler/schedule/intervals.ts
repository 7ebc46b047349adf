// Address intervals for the arena passes: a free list (best-fit allocation with
// coalescing; "far" allocation: fresh bytes within a budget, else the range
// a caller scores best; "quiet" allocation: first the smallest range the
// caller scores below zero, i.e. whose reuse adds no wait, then as "far") and
// a "last occupant" map (for each freed byte range,
// the free instruction of the buffer that held it last). Sorted arrays, held
// in typed arrays (no object per interval: the arena places ~10^4 buffers up
// to a dozen times per candidate); the number of intervals stays near the
// number of live buffers.

/** Rows of `w` numbers in one Float64Array (row i at [w i, w i + w)) with a count: splice keeps them in place order. */
class Rows {
  a = new Float64Array(64);
  n = 0;
  constructor(readonly w: number) {}
  /** Replaces rows [i, i + remove) by `add` rows at i (filled by the caller). */
  splice(i: number, remove: number, add: number): void {
    const w = this.w, n = this.n + add - remove;
    if (n * w > this.a.length) { const d = new Float64Array(Math.max(2 * this.a.length, n * w)); d.set(this.a.subarray(0, this.n * w)); this.a = d; }
    if (add !== remove) this.a.copyWithin((i + add) * w, (i + remove) * w, this.n * w);
    this.n = n;
  }
}

export class FreeList {
  /** Disjoint free ranges [lo, hi), sorted by lo: range i is r.a[2i], r.a[2i + 1]. */
  private r = new Rows(2);
  top: number;

  constructor(base: number) { this.top = base; }

  /** Lowest-waste range that fits `size` at a multiple of `align`, else the top of the arena.
   *  The bytes skipped to reach an aligned start stay free. */
  alloc(size: number, align = 1): number {
    const a = this.r.a, n = this.r.n;
    let best = -1, bestWidth = Infinity;
    for (let i = 0; i < n; i++) {
      const lo = a[2 * i], hi = a[2 * i + 1];
      if (Math.ceil(lo / align) * align + size <= hi && hi - lo < bestWidth) { best = i; bestWidth = hi - lo; }
    }
    if (best >= 0) return this.take(best, size, align);
    // a free range ending at the top can be extended
    const up = (x: number) => Math.ceil(x / align) * align;
    if (n > 0 && a[2 * n - 1] === this.top) return this.extendTop(size, align);
    const at = up(this.top);
    if (at > this.top) this.insert(n, this.top, at);
    this.top = at + size;
    return at;
  }

  /** For a buffer that should not wait for recent frees: fresh bytes at the top of
   *  the arena while `budget` allows, else the fitting free range with the lowest
   *  score(start) (ties: the smaller range, then the lower address), else the top. */
  allocFar(size: number, align: number, budget: number, score: (at: number) => number): number {
    const up = (x: number) => Math.ceil(x / align) * align;
    if (up(this.top) + size <= budget) {
      const at = up(this.top);
      if (at > this.top) this.free(this.top, at);
      this.top = at + size;
      return at;
    }
    const a = this.r.a, n = this.r.n;
    let best = -1, bestScore = Infinity, bestWidth = Infinity;
    for (let i = 0; i < n; i++) {
      const lo = a[2 * i], hi = a[2 * i + 1];
      if (up(lo) + size > hi) continue;
      const s = score(up(lo));
      if (best < 0 || s < bestScore || (s === bestScore && hi - lo < bestWidth)) { best = i; bestScore = s; bestWidth = hi - lo; }
    }
    if (best < 0) return this.alloc(size, align);
    return this.take(best, size, align);
  }

  /** For any buffer when there is room: the smallest fitting free range with
   *  score(start) < 0 (reusing it adds no wait), else fresh bytes at the top
   *  while `budget` allows, else the fitting range with the lowest score (ties:
   *  the smaller range), else the top. */
  allocQuiet(size: number, align: number, budget: number, score: (at: number) => number): number {
    const best = this.smallestFitting(size, align, (at) => score(at) < 0);
    if (best >= 0) return this.take(best, size, align);
    return this.allocFar(size, align, budget, score);
  }

  /** Index of the smallest free range that fits `size` at an `align`ed start `ok` accepts; -1 when none. */
  private smallestFitting(size: number, align: number, ok: (at: number) => boolean): number {
    const a = this.r.a, n = this.r.n;
    let best = -1, bestWidth = Infinity;
    for (let i = 0; i < n; i++) {
      const lo = a[2 * i], hi = a[2 * i + 1], at = Math.ceil(lo / align) * align;
      if (at + size > hi) continue;
      if (hi - lo < bestWidth && ok(at)) { best = i; bestWidth = hi - lo; }
    }
    return best;
  }

  /** The smallest fitting free range whose start `allowed` accepts, else fresh bytes at the top within `budget` (a free range ending at the top is extended when allowed); -1 when neither. */
  allocBefore(size: number, align: number, budget: number, allowed: (at: number) => boolean): number {
    const up = (x: number) => Math.ceil(x / align) * align;
    const best = this.smallestFitting(size, align, allowed);
    if (best >= 0) return this.take(best, size, align);
    const a = this.r.a, n = this.r.n;
    if (n > 0 && a[2 * n - 1] === this.top && up(a[2 * n - 2]) + size <= budget && allowed(up(a[2 * n - 2]))) return this.extendTop(size, align);
    const at = up(this.top);
    if (at + size > budget) return -1;
    if (at > this.top) this.free(this.top, at);
    this.top = at + size;
    return at;
  }

  /** The last range, which ends at the top, taken from its first aligned byte and extended by `size` (the bytes it skips stay free). */
  private extendTop(size: number, align: number): number {
    const a = this.r.a, n = this.r.n, lo = a[2 * n - 2], at = Math.ceil(lo / align) * align;
    if (at > lo) a[2 * n - 1] = at; else this.r.n--;
    this.top = at + size;
    return at;
  }

  private insert(i: number, lo: number, hi: number): void {
    this.r.splice(i, 0, 1);
    this.r.a[2 * i] = lo; this.r.a[2 * i + 1] = hi;
  }

  /** Takes `size` bytes at the first `align`ed address of free range i, keeping what is left on either side. */
  private take(i: number, size: number, align: number): number {
    const lo = this.r.a[2 * i], hi = this.r.a[2 * i + 1];
    const at = Math.ceil(lo / align) * align;
    const left = at > lo, right = at + size < hi;
    this.r.splice(i, 1, (left ? 1 : 0) + (right ? 1 : 0));
    const a = this.r.a;
    let k = 2 * i;
    if (left) { a[k++] = lo; a[k++] = at; }
    if (right) { a[k++] = at + size; a[k] = hi; }
    return at;
  }

  free(lo: number, hi: number): void {
    const n = this.r.n;
    // i: the first range starting at or after lo (binary search: the ranges are sorted)
    let p = 0, q = n;
    while (p < q) { const m = (p + q) >> 1; if (this.r.a[2 * m] < lo) p = m + 1; else q = m; }
    const i = p;
    const joinsNext = i < n && this.r.a[2 * i] === hi, joinsPrev = i > 0 && this.r.a[2 * i - 1] === lo;
    if (joinsPrev && joinsNext) { this.r.a[2 * i - 1] = this.r.a[2 * i + 1]; this.r.splice(i, 1, 0); }
    else if (joinsPrev) this.r.a[2 * i - 1] = hi;
    else if (joinsNext) this.r.a[2 * i] = lo;
    else this.insert(i, lo, hi);
  }
}

export class LastOccupant {
  /** Disjoint [lo, hi) with the free instruction of its last occupant, sorted by lo (and so by hi): part i is r.a[3i .. 3i + 3). */
  private r = new Rows(3);

  /** Index of the first part ending after `x`. */
  private firstEndingAfter(x: number): number {
    const a = this.r.a;
    let p = 0, q = this.r.n;
    while (p < q) { const m = (p + q) >> 1; if (a[3 * m + 1] > x) q = m; else p = m + 1; }
    return p;
  }

  /** The free instructions of the last occupants of [lo, hi); the range is then cleared (a new occupant takes it). */
  take(lo: number, hi: number): number[] {
    const out: number[] = [];
    this.replace(lo, hi, -1, out);
    return out;
  }

  /**
   * Clears [lo, hi) (the parts that overlap it, pushed to `out` when given,
   * keep what sticks out on either side) and, when `at` >= 0, records it as
   * freed by `at`: one splice of the rows.
   */
  private replace(lo: number, hi: number, at: number, out?: number[]): void {
    const a = this.r.a, n = this.r.n;
    const i = this.firstEndingAfter(lo);
    let j = i;
    for (; j < n && a[3 * j] < hi; j++) out?.push(a[3 * j + 2]);
    if (j === i && at < 0) return;
    // only the first part can start before lo, only the last end after hi
    const keepLeft = j > i && a[3 * i] < lo, keepRight = j > i && a[3 * j - 2] > hi;
    const l0 = a[3 * i], la = a[3 * i + 2], r1 = a[3 * j - 2], ra = a[3 * j - 1];
    this.r.splice(i, j - i, (keepLeft ? 1 : 0) + (at >= 0 ? 1 : 0) + (keepRight ? 1 : 0));
    const b = this.r.a;
    let k = 3 * i;
    if (keepLeft) { b[k++] = l0; b[k++] = lo; b[k++] = la; }
    if (at >= 0) { b[k++] = lo; b[k++] = hi; b[k++] = at; }
    if (keepRight) { b[k++] = hi; b[k++] = r1; b[k] = ra; }
  }

  /** The latest free instruction among the last occupants of [lo, hi) for which `counts` holds; -1 when none. */
  latestWhere(lo: number, hi: number, counts: (freeInstruction: number) => boolean): number {
    const a = this.r.a, n = this.r.n;
    let out = -1;
    for (let j = this.firstEndingAfter(lo); j < n && a[3 * j] < hi; j++) if (counts(a[3 * j + 2])) out = Math.max(out, a[3 * j + 2]);
    return out;
  }

  /** The most of value[free] over the last occupants of [lo, hi) for which `counts` holds; -Infinity when none. */
  mostWhere(lo: number, hi: number, counts: (freeInstruction: number) => boolean, value: Float64Array): number {
    const a = this.r.a, n = this.r.n;
    let out = -Infinity;
    for (let j = this.firstEndingAfter(lo); j < n && a[3 * j] < hi; j++) if (counts(a[3 * j + 2])) out = Math.max(out, value[a[3 * j + 2]]);
    return out;
  }

  /** The latest free instruction among the last occupants of [lo, hi); -1 when none. */
  latest(lo: number, hi: number): number {
    const a = this.r.a, n = this.r.n;
    let out = -1;
    for (let j = this.firstEndingAfter(lo); j < n && a[3 * j] < hi; j++) out = Math.max(out, a[3 * j + 2]);
    return out;
  }

  /** [lo, hi) was freed by instruction `at`. */
  set(lo: number, hi: number, at: number): void { this.replace(lo, hi, at); }
}

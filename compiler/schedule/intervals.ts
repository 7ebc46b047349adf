// Address intervals for the arena passes: a free list (best-fit allocation with
// coalescing; "far" allocation: fresh bytes within a budget, else the range
// a caller scores best; "quiet" allocation: first the smallest range the
// caller scores below zero, i.e. whose reuse adds no wait, then as "far") and
// a "last occupant" map (for each freed byte range,
// the free instruction of the buffer that held it last). Plain sorted arrays: the
// number of intervals stays near the number of live buffers.

export class FreeList {
  /** Disjoint free ranges [lo, hi), sorted by lo. */
  private ranges: [number, number][] = [];
  top: number;

  constructor(base: number) { this.top = base; }

  /** Lowest-waste range that fits `size` at a multiple of `align`, else the top of the arena.
   *  The bytes skipped to reach an aligned start stay free. */
  alloc(size: number, align = 1): number {
    const up = (x: number) => Math.ceil(x / align) * align;
    let best = -1;
    for (let i = 0; i < this.ranges.length; i++) {
      const [lo, hi] = this.ranges[i];
      if (up(lo) + size <= hi && (best < 0 || hi - lo < this.ranges[best][1] - this.ranges[best][0])) best = i;
    }
    if (best < 0) {
      // a free range ending at the top can be extended
      const last = this.ranges[this.ranges.length - 1];
      const at = last && last[1] === this.top ? up(last[0]) : up(this.top);
      if (last && last[1] === this.top) { this.ranges.pop(); if (at > last[0]) this.ranges.push([last[0], at]); }
      else if (at > this.top) this.ranges.push([this.top, at]);
      this.top = at + size;
      return at;
    }
    return this.take(best, size, align);
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
    let best = -1, bestScore = Infinity;
    for (let i = 0; i < this.ranges.length; i++) {
      const [lo, hi] = this.ranges[i];
      if (up(lo) + size > hi) continue;
      const s = score(up(lo));
      if (best < 0 || s < bestScore || (s === bestScore && hi - lo < this.ranges[best][1] - this.ranges[best][0])) { best = i; bestScore = s; }
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
    const up = (x: number) => Math.ceil(x / align) * align;
    let best = -1;
    for (let i = 0; i < this.ranges.length; i++) {
      const [lo, hi] = this.ranges[i];
      if (up(lo) + size > hi) continue;
      if ((best < 0 || hi - lo < this.ranges[best][1] - this.ranges[best][0]) && ok(up(lo))) best = i;
    }
    return best;
  }

  /** The smallest fitting free range whose start `allowed` accepts, else fresh bytes at the top within `budget` (a free range ending at the top is extended when allowed); -1 when neither. */
  allocBefore(size: number, align: number, budget: number, allowed: (at: number) => boolean): number {
    const up = (x: number) => Math.ceil(x / align) * align;
    const best = this.smallestFitting(size, align, allowed);
    if (best >= 0) return this.take(best, size, align);
    const last = this.ranges[this.ranges.length - 1];
    if (last && last[1] === this.top && up(last[0]) + size <= budget && allowed(up(last[0]))) {
      const at = up(last[0]);
      this.ranges.pop();
      if (at > last[0]) this.ranges.push([last[0], at]);
      this.top = at + size;
      return at;
    }
    const at = up(this.top);
    if (at + size > budget) return -1;
    if (at > this.top) this.free(this.top, at);
    this.top = at + size;
    return at;
  }

  /** Takes `size` bytes at the first `align`ed address of free range i, keeping what is left on either side. */
  private take(i: number, size: number, align: number): number {
    const [lo, hi] = this.ranges[i];
    const at = Math.ceil(lo / align) * align;
    const parts: [number, number][] = [];
    if (at > lo) parts.push([lo, at]);
    if (at + size < hi) parts.push([at + size, hi]);
    this.ranges.splice(i, 1, ...parts);
    return at;
  }

  free(lo: number, hi: number): void {
    let i = 0;
    while (i < this.ranges.length && this.ranges[i][0] < lo) i++;
    this.ranges.splice(i, 0, [lo, hi]);
    if (i + 1 < this.ranges.length && this.ranges[i][1] === this.ranges[i + 1][0]) { this.ranges[i][1] = this.ranges[i + 1][1]; this.ranges.splice(i + 1, 1); }
    if (i > 0 && this.ranges[i - 1][1] === this.ranges[i][0]) { this.ranges[i - 1][1] = this.ranges[i][1]; this.ranges.splice(i, 1); }
  }
}

export class LastOccupant {
  /** Disjoint [lo, hi, freeInstruction], sorted by lo (and so by hi). */
  private parts: [number, number, number][] = [];

  /** Index of the first part ending after `x`. */
  private firstEndingAfter(x: number): number {
    let a = 0, b = this.parts.length;
    while (a < b) { const m = (a + b) >> 1; if (this.parts[m][1] > x) b = m; else a = m + 1; }
    return a;
  }

  /** The free instructions of the last occupants of [lo, hi); the range is then cleared (a new occupant takes it). */
  take(lo: number, hi: number): number[] {
    const out: number[] = [];
    const rest: [number, number, number][] = [];
    const i = this.firstEndingAfter(lo);
    let j = i;
    for (; j < this.parts.length && this.parts[j][0] < hi; j++) {
      const p = this.parts[j];
      out.push(p[2]);
      if (p[0] < lo) rest.push([p[0], lo, p[2]]);
      if (p[1] > hi) rest.push([hi, p[1], p[2]]);
    }
    if (j > i) this.parts.splice(i, j - i, ...rest);
    return out;
  }

  /** The latest free instruction among the last occupants of [lo, hi) for which `counts` holds; -1 when none. */
  latestWhere(lo: number, hi: number, counts: (freeInstruction: number) => boolean): number {
    let out = -1;
    for (let j = this.firstEndingAfter(lo); j < this.parts.length && this.parts[j][0] < hi; j++) if (counts(this.parts[j][2])) out = Math.max(out, this.parts[j][2]);
    return out;
  }

  /** The most of value[free] over the last occupants of [lo, hi) for which `counts` holds; -Infinity when none. */
  mostWhere(lo: number, hi: number, counts: (freeInstruction: number) => boolean, value: Float64Array): number {
    let out = -Infinity;
    for (let j = this.firstEndingAfter(lo); j < this.parts.length && this.parts[j][0] < hi; j++) if (counts(this.parts[j][2])) out = Math.max(out, value[this.parts[j][2]]);
    return out;
  }

  /** The latest free instruction among the last occupants of [lo, hi); -1 when none. */
  latest(lo: number, hi: number): number {
    let out = -1;
    for (let j = this.firstEndingAfter(lo); j < this.parts.length && this.parts[j][0] < hi; j++) out = Math.max(out, this.parts[j][2]);
    return out;
  }

  /** [lo, hi) was freed by instruction `at`. */
  set(lo: number, hi: number, at: number): void {
    this.take(lo, hi);
    this.parts.splice(this.firstEndingAfter(lo), 0, [lo, hi, at]);
  }
}

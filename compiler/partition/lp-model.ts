// A small builder for linear programs in the form HiGHS takes: minimise c'x
// subject to lower <= Ax <= upper and column bounds. Rows are added as sparse
// (column, coefficient) lists; duplicate columns in one row are summed (in the
// order given). The matrix is kept row-wise in growable typed arrays (no
// per-row garbage): building an LP of 10^4 rows and 10^5 nonzeros takes
// milliseconds, not the collector's time.

/** 2^21: the places a row's terms can take in a long row's sort key (LinearProgram.row). */
const PLACES = 2 ** 21;

export class LinearProgram {
  readonly colCost: number[] = [];
  readonly colLower: number[] = [];
  readonly colUpper: number[] = [];
  readonly colNames: string[] = [];
  readonly rowLower: number[] = [];
  readonly rowUpper: number[] = [];
  private starts = new Int32Array(1024);
  private indices = new Int32Array(4096);
  private values = new Float64Array(4096);
  private nz = 0;
  // one row's terms before they are sorted and summed
  private scratchCol = new Int32Array(64);
  private scratchVal = new Float64Array(64);
  private scratchOrder = new Int32Array(64);
  private scratchKey = new Float64Array(64);

  col(name: string, cost = 0, lower = 0, upper = Infinity): number {
    this.colNames.push(name);
    this.colCost.push(cost);
    this.colLower.push(lower);
    this.colUpper.push(upper);
    return this.colCost.length - 1;
  }

  /** lower <= sum(coef * x[col]) <= upper. */
  row(terms: readonly (readonly [number, number])[], lower: number, upper: number): number {
    let n = 0, sorted = true;
    // (an indexed loop: for-of's iterator and destructuring cost ~20 % of a cold build)
    for (let i = 0; i < terms.length; i++) {
      const c = terms[i][0], v = terms[i][1];
      if (v === 0) continue;
      if (n === this.scratchCol.length) { this.scratchCol = grown(this.scratchCol, 2 * n); this.scratchVal = grown(this.scratchVal, 2 * n); }
      if (n > 0 && c <= this.scratchCol[n - 1]) sorted = false;
      this.scratchCol[n] = c; this.scratchVal[n] = v; n++;
    }
    const cols = this.scratchCol, vals = this.scratchVal;
    // by column, ties in the order given (so sums are the same every run)
    let order: ArrayLike<number> | undefined;
    if (!sorted && n <= 32) {
      // short rows (most of them): a stable insertion sort, no garbage
      if (this.scratchOrder.length < n) this.scratchOrder = new Int32Array(64);
      const o = this.scratchOrder;
      for (let i = 0; i < n; i++) {
        let j = i - 1;
        for (; j >= 0 && cols[o[j]] > cols[i]; j--) o[j + 1] = o[j];
        o[j + 1] = i;
      }
      order = o;
    } else if (!sorted) {
      // long rows: each term's column and place packed in one exact double
      // (column * 2^21 + place; rows stay far below 2^21 terms), sorted by the
      // typed array's own numeric sort (a comparator sort cost ~10 % of a
      // large model's LP builds)
      if (n >= PLACES) throw new Error(`internal: an LP row of ${n} terms (at most ${PLACES - 1})`);
      if (this.scratchKey.length < n) this.scratchKey = new Float64Array(2 * n);
      const key = this.scratchKey.subarray(0, n);
      for (let k = 0; k < n; k++) key[k] = cols[k] * PLACES + k;
      key.sort();
      if (this.scratchOrder.length < n) this.scratchOrder = new Int32Array(2 * n);
      const o = this.scratchOrder;
      for (let k = 0; k < n; k++) o[k] = key[k] % PLACES;
      order = o;
    }
    if (this.nz + n > this.indices.length) { this.indices = grown(this.indices, 2 * (this.nz + n)); this.values = grown(this.values, 2 * (this.nz + n)); }
    for (let k = 0; k < n;) {
      const c = cols[order ? order[k] : k];
      let v = 0;
      for (; k < n && cols[order ? order[k] : k] === c; k++) v += vals[order ? order[k] : k];
      this.indices[this.nz] = c; this.values[this.nz] = v; this.nz++; // a sum that cancels stays, as an explicit zero
    }
    const r = this.rowLower.length;
    if (r + 2 > this.starts.length) this.starts = grown(this.starts, 2 * (r + 2));
    this.starts[r + 1] = this.nz;
    this.rowLower.push(lower);
    this.rowUpper.push(upper);
    return r;
  }

  get numCols(): number { return this.colCost.length; }
  get numRows(): number { return this.rowLower.length; }
  get nonzeros(): number { return this.nz; }

  /** The model as HiGHS ModelData (infinities mapped to the solver's). */
  toHighs(inf: number) {
    const fix = (a: number[]) => Float64Array.from(a, (v) => (v === Infinity ? inf : v === -Infinity ? -inf : v));
    return {
      numCols: this.numCols, numRows: this.numRows,
      colCost: Float64Array.from(this.colCost), colLower: fix(this.colLower), colUpper: fix(this.colUpper),
      rowLower: fix(this.rowLower), rowUpper: fix(this.rowUpper),
      matrix: {
        format: 'csr' as const, numRows: this.numRows, numCols: this.numCols,
        starts: this.starts.slice(0, this.numRows + 1), indices: this.indices.slice(0, this.nz), values: this.values.slice(0, this.nz),
      },
    };
  }
}

function grown<A extends Int32Array | Float64Array>(a: A, length: number): A {
  const b = new (a.constructor as new (n: number) => A)(length);
  b.set(a);
  return b;
}

// A small builder for linear programs in the form HiGHS takes: minimise c'x
// subject to lower <= Ax <= upper and column bounds. Rows are added as sparse
// (column, coefficient) lists; duplicate columns in one row are summed.

export class LinearProgram {
  readonly colCost: number[] = [];
  readonly colLower: number[] = [];
  readonly colUpper: number[] = [];
  readonly colNames: string[] = [];
  readonly rowLower: number[] = [];
  readonly rowUpper: number[] = [];
  private readonly starts: number[] = [0];
  private readonly indices: number[] = [];
  private readonly values: number[] = [];

  col(name: string, cost = 0, lower = 0, upper = Infinity): number {
    this.colNames.push(name);
    this.colCost.push(cost);
    this.colLower.push(lower);
    this.colUpper.push(upper);
    return this.colCost.length - 1;
  }

  /** lower <= sum(coef * x[col]) <= upper. */
  row(terms: Iterable<[number, number]>, lower: number, upper: number): number {
    // sort by column (stable: equal columns keep their order, so sums are the same every run) and sum duplicates
    const cols: number[] = [], vals: number[] = [];
    let sorted = true;
    for (const [c, v] of terms) {
      if (v === 0) continue;
      if (cols.length && c <= cols[cols.length - 1]) sorted = false;
      cols.push(c); vals.push(v);
    }
    let order: number[] | undefined;
    if (!sorted) order = cols.map((_, k) => k).sort((a, b) => cols[a] - cols[b] || a - b);
    const n = cols.length;
    for (let k = 0; k < n;) {
      const c = cols[order ? order[k] : k];
      let v = 0;
      for (; k < n && cols[order ? order[k] : k] === c; k++) v += vals[order ? order[k] : k];
      this.indices.push(c); this.values.push(v); // a sum that cancels stays, as an explicit zero
    }
    this.starts.push(this.indices.length);
    this.rowLower.push(lower);
    this.rowUpper.push(upper);
    return this.rowLower.length - 1;
  }

  get numCols(): number { return this.colCost.length; }
  get numRows(): number { return this.rowLower.length; }
  get nonzeros(): number { return this.indices.length; }

  /** The model as HiGHS ModelData (infinities mapped to the solver's). */
  toHighs(inf: number) {
    const fix = (a: number[]) => Float64Array.from(a, (v) => (v === Infinity ? inf : v === -Infinity ? -inf : v));
    return {
      numCols: this.numCols, numRows: this.numRows,
      colCost: Float64Array.from(this.colCost), colLower: fix(this.colLower), colUpper: fix(this.colUpper),
      rowLower: fix(this.rowLower), rowUpper: fix(this.rowUpper),
      matrix: { format: 'csr' as const, numRows: this.numRows, numCols: this.numCols, starts: Int32Array.from(this.starts), indices: Int32Array.from(this.indices), values: Float64Array.from(this.values) },
    };
  }
}

// Where the package's own files are, whether running from dist/ or from source.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/** The directory holding tiercut's package.json. */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).name === 'tiercut') return (root = dir);
    const up = dirname(dir);
    if (up === dir) throw new Error('tiercut: cannot find the package root from ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

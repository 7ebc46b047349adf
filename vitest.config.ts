import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // the directory of plans that test files share (test/compiled-once.ts)
    globalSetup: ['test/global-setup.ts'],
    // two test files at once even on 2 cores (vitest's default there is one):
    // most files wait on a solver thread, a child process or the disk for part
    // of their time; the suite took 734 s one file at a time on this 2-core
    // VM and 518 s two at a time, every test passing both ways
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});

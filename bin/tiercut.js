#!/usr/bin/env node
import { main } from '../dist/src/cli.js';
// A closed pipe (`tiercut run … | head`): a command that writes files (a
// checkpoint, a trace, a plan) goes on with its output dropped, so that they
// are written (it had exited 0 with no checkpoint); any other ends quietly.
const argv = process.argv.slice(2);
const writesFiles = argv.some((a) => /^(-o|--save|--trace)(=|$)/.test(a));
process.stdout.on('error', (e) => {
  if (e.code !== 'EPIPE') throw e;
  if (!writesFiles) process.exit(0);
  process.stdout.write = () => true;
});
main(argv).then((code) => { process.exitCode = code; }, (e) => { console.error(e); process.exitCode = 1; });

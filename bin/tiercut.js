#!/usr/bin/env node
import { main } from '../dist/src/cli.js';
// a closed pipe (`tiercut run … | head`) ends the output quietly
process.stdout.on('error', (e) => { if (e.code === 'EPIPE') process.exit(0); throw e; });
main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (e) => { console.error(e); process.exitCode = 1; });

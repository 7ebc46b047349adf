#!/usr/bin/env node
// Writes docs/plan.schema.json from compiler/plan/schema.ts (npm run schema).
import { writeFileSync } from 'node:fs';
import { PLAN_SCHEMA } from '../dist/compiler/plan/schema.js';
writeFileSync(new URL('../docs/plan.schema.json', import.meta.url), JSON.stringify(PLAN_SCHEMA, null, 2) + '\n');

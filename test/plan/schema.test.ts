// The committed JSON Schema is the one the code validates with (golden file;
// accept a change with `npm run build && npm run schema`).
import { it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { PLAN_SCHEMA, validateSchema } from '../../compiler/plan/schema.js';

it('docs/plan.schema.json matches compiler/plan/schema.ts', () => {
  expect(JSON.parse(readFileSync('docs/plan.schema.json', 'utf8'))).toEqual(JSON.parse(JSON.stringify(PLAN_SCHEMA)));
});

it('the validator reports the path of a wrong field', () => {
  expect(validateSchema({ formatVersion: 1 })[0]).toBe("plan: missing 'generator'");
  const errs = validateSchema([{ id: 0, stream: 'gpu', kind: 'jump', op: 0, inputs: [], outputs: [], waits: [-4] }], PLAN_SCHEMA.properties!.instructions, 'plan.instructions');
  expect(errs).toEqual(['plan.instructions[0].kind: expected one of run, copy, free, got "jump"', 'plan.instructions[0].waits[0]: -4 is below the minimum 0']);
});

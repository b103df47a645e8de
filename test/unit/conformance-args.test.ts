import {expect, test} from '@jest/globals'
import {dirname, join} from 'node:path'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any
const Root = join(dirname(new URL(import.meta.url).pathname), '..', '..')
const run: Any = await import(join(Root, 'test/conformance/run.mjs'))

test('run.mjs refuses what it does not know before a run starts, and --help is help, not a run', () => {
  expect(run.parseArgs(['--help'])).toEqual({help: true})
  expect(run.parseArgs(['--only', 'init-two', '--help'])).toEqual({help: true})
  expect(run.parseArgs([])).toEqual({opts: {}})
  expect(run.parseArgs(['--only', 'init-two,sidecar-job', '--out', '/tmp/x'])).toEqual({opts: {only: 'init-two,sidecar-job', out: '/tmp/x'}})
  expect(run.parseArgs(['--bogus', 'x'])).toEqual({error: 'unknown argument --bogus'})
  expect(run.parseArgs(['--only'])).toEqual({error: '--only needs a value'})
  expect(run.parseArgs(['--out', '--only', 'x'])).toEqual({error: '--out needs a value'})
  expect(run.parseArgs(['--window', 'soon'])).toEqual({error: '--window soon: must be a number of seconds above 0'})
})

test('an --only entry that names no spec is found without starting anything', () => {
  expect(run.unknownSpecs(['init-two', 'sidecar-job'])).toEqual([])
  expect(run.unknownSpecs(['init-two', 'no-such-spec'])).toEqual(['no-such-spec'])
})

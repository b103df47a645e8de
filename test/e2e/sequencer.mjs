// The order test files start in (jest's testSequencer). Plain ESM: jest loads
// it before any transform.
//
// The workers share the machine, and a few files cannot run beside some
// others (host-lock.ts). Jest's own order (longest or largest first) puts them
// anywhere, and a lane that picks one up waits for the lock: in a run with
// that order, a file holding the machine started a few seconds after the pod
// network's file, waited 90 s for it with two lanes idle, and the files of the
// network lock then ran one after another at the end of the run. This order:
//   1. the files that have the machine to themselves, before any other file
//      takes its share (MachineFirstEnv: the shared holders wait for them);
//   2. the network lock's blocks (network-lock.test.ts), the longest chain of
//      work that runs one block at a time, so it runs beside everything else
//      rather than after it;
//   3. the other e2e files, then the unit tests, which fill the last minutes.
// Within a group, jest's order: failed last time first, then longest, then largest.
import {readFileSync} from 'node:fs'
import {basename, dirname, join} from 'node:path'
import Sequencer from '@jest/test-sequencer'
import {MachineFirstEnv} from './env.mjs'

/** What a test file's top-level describe says about the locks it takes (helpers.ts). */
export function lockGroup(source) {
  if (/\bdescribeMachineE2e\(/.test(source)) return 0
  if (/\bdescribeHostE2e\(|\bdescribeHolding\(\[[^\]]*'network'/.test(source)) return 1
  return 2
}

/**
 * The group of a test file: 0 machine, 1 network lock, 2 other e2e, 3 unit.
 * A file made of blocks it imports for their describes (`import './x.js'`,
 * network-lock.test.ts) is in the first group of any of them.
 */
export function fileGroup(path, read = (p) => readFileSync(p, 'utf8')) {
  if (!/\/test\/e2e\//.test(path)) return 3
  const source = read(path)
  const blocks = [...source.matchAll(/^import '(\.{1,2}\/[^']+)\.js'$/gm)].map((m) => join(dirname(path), `${m[1]}.ts`))
  return Math.min(lockGroup(source), ...blocks.map((b) => lockGroup(read(b))))
}

/** The tests by group, each group in the order given; and the names of the machine files among them. */
export function groupOrder(tests, groupOf) {
  const group = new Map(tests.map((t) => [t.path, groupOf(t.path)]))
  // Array sort is stable: within a group, the order given.
  const sorted = [...tests].sort((a, b) => group.get(a.path) - group.get(b.path))
  const machineFirst = sorted.filter((t) => group.get(t.path) === 0).map((t) => basename(t.path))
  return {sorted, machineFirst}
}

export default class LockAwareSequencer extends (Sequencer.default ?? Sequencer) {
  sort(tests) {
    const {sorted, machineFirst} = groupOrder(super.sort([...tests]), (p) => fileGroup(p))
    // The workers inherit this process's environment: they learn which machine files run, and wait for them.
    process.env[MachineFirstEnv] = machineFirst.join(',')
    return sorted
  }
}

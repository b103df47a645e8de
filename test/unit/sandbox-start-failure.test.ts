import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import {chmodSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {terminationOf} from '../../src/emulator/runtime/container/exit.js'
import {ContainerState} from '../../src/emulator/runtime/container/state.js'
import {ContainerProcess} from '../../src/emulator/runtime/process/container-process.js'
import {tempDir} from './temp-dirs.js'

/**
 * A stand-in for bwrap on vnode's PATH, speaking its protocol on the status
 * and block fds (3 and 4): it names its PID 1 (itself), waits to be let go,
 * then either fails as bwrap fails in its setup (its words on stderr, exit
 * status 1, no exit code of its command) or reports its command's exit 1.
 */
const FakeBwrap = `#!/bin/sh
echo "{ \\"child-pid\\": $$ }" >&3
head -c 2 <&4 >/dev/null
if [ -e "$(dirname "$0")/setup-fails" ]; then
  echo "bwrap: Can't mount proc on /newroot/proc: Device or resource busy" >&2
  exit 1
fi
echo "{ \\"exit-code\\": 1 }" >&3
exit 1
`

describe("a sandbox that fails before its program runs (bwrap's own end after naming PID 1)", () => {
  const dir = tempDir('vnode-bwrap-fails-')
  const path = process.env.PATH
  beforeAll(() => {
    writeFileSync(join(dir, 'bwrap'), FakeBwrap)
    chmodSync(join(dir, 'bwrap'), 0o755)
    process.env.PATH = `${dir}:${path}`
  })
  afterAll(() => {
    process.env.PATH = path
  })

  async function run(name: string) {
    const c = new ContainerState({name: 'app', image: 'busybox'}, 'regular', {initialMs: 10_000, maxMs: 300_000, resetMs: 600_000})
    const logPath = join(dir, `${name}.log`)
    c.created({containerID: `containerd://${name}`, imageID: 'busybox', logPath, terminationFile: join(dir, `${name}.termination`)})
    const proc = await ContainerProcess.start({argv: ['/bin/true'], env: {}, cwd: '/', logPath, pipes: join(dir, `${name}.pipe`), sandbox: {hostname: 'h', binds: [], hide: []}})
    const exit = await proc.exited
    return {exit, termination: terminationOf(c, proc.startedAt, exit, false)}
  }

  test("its end is a StartError (exit code 128) in bwrap's words, not the exit status 1 of a program that never ran", async () => {
    writeFileSync(join(dir, 'setup-fails'), '')
    const {exit, termination} = await run('fails')
    expect(exit).toMatchObject({exitCode: 1, setupFailed: true})
    expect(termination).toMatchObject({
      exitCode: 128,
      reason: 'StartError',
      message: "failed to start container process: bwrap: Can't mount proc on /newroot/proc: Device or resource busy",
    })
  })

  test('a program that ran and exited 1 is an Error with exit code 1, as before', async () => {
    rmSync(join(dir, 'setup-fails'), {force: true})
    const {exit, termination} = await run('ran')
    expect(exit.setupFailed).toBeUndefined()
    expect(termination).toMatchObject({exitCode: 1, reason: 'Error'})
  })
})

import {afterAll, beforeAll, expect} from '@jest/globals'
import {chmodSync, mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {hostProgram} from '../../src/emulator/runtime/process/host-programs.js'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, runDir, stopAllVnodes, testWhen, uniqueName, waitFor} from './helpers.js'

const bwrap = hostProgram('bwrap')

/**
 * The node's bwrap, behind a wrapper on its PATH that asks the real one to
 * bind a source that does not exist whenever the container's command
 * carries the marker: bwrap names the container's PID 1, then fails in its
 * setup (`Can't find source path`, exit status 1) before the program runs.
 * Every other sandbox of the node is bwrap's own.
 */
function bwrapThatFailsOn(marker: string, dir: string): string {
  mkdirSync(dir, {recursive: true})
  const missing = `/nonexistent-${marker}`
  writeFileSync(join(dir, 'bwrap'), `#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = "${marker}" ]; then exec ${bwrap} --ro-bind ${missing} ${missing} "$@"; fi\ndone\nexec ${bwrap} "$@"\n`)
  chmodSync(join(dir, 'bwrap'), 0o755)
  return missing
}

/**
 * A sandbox that fails before its program runs is a failed start, as runc's
 * is on a kubelet: StartError, exit code 128, bwrap's words, a Failed event;
 * never the exit status 1 of a program that did not run.
 */
describeE2e('a pod sandbox that fails in its setup', () => {
  const f = new KubectlFixture('sbx-fail')
  const marker = uniqueName('setup-fails')
  const wrapperDir = join(runDir(), 'bwrap-wrapper', marker)
  let missing = ''

  beforeAll(async () => {
    if (!bwrap.startsWith('/')) return
    missing = bwrapThatFailsOn(marker, wrapperDir)
    await f.setUp(['--sandbox', 'namespaces'], {PATH: `${wrapperDir}:${process.env.PATH}`})
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  testWhen(bwrap.startsWith('/'), 'bwrap is not installed')(
    "StartError with exit code 128 in bwrap's words, the Failed event, and the node serves the next pod",
    async () => {
      await f.create({
        metadata: {name: 'broken'},
        spec: {restartPolicy: 'Never', containers: [{name: 'app', image: 'busybox', command: ['/bin/sh', '-c', 'exit 0', marker]}]},
      })
      const ended = await waitFor(async () => (await f.c.core.readNamespacedPod({name: 'broken', namespace: f.ns})).status?.containerStatuses?.[0]?.state?.terminated, 'the container ended', 30_000)
      expect(ended).toMatchObject({
        exitCode: 128,
        reason: 'StartError',
        message: `failed to start container process: bwrap: Can't find source path ${missing}: No such file or directory`,
      })
      // The sync that finds the container ended writes it with the phase held while the sandbox is still there (the
      // kubelet's stages, kubectl-status-stages.test.ts); Failed follows once the sandbox is gone.
      const phase = await waitFor(
        async () => {
          const p = (await f.c.core.readNamespacedPod({name: 'broken', namespace: f.ns})).status?.phase
          return p === 'Pending' ? undefined : p
        },
        'the phase after the held one',
        10_000,
      )
      expect(phase).toBe('Failed')
      const events = await kubectl(['get', 'events', '-n', f.ns, '--field-selector', 'involvedObject.name=broken,reason=Failed', '-o', 'jsonpath={.items[*].message}'])
      expect(events.stdout).toContain(`Error: failed to start container process: bwrap: Can't find source path ${missing}`)
      // The same node starts the next pod as ever.
      await f.create({metadata: {name: 'fine'}, spec: {restartPolicy: 'Never', containers: [{name: 'app', image: 'busybox', command: ['/bin/sh', '-c', 'exit 3']}]}})
      const fine = await waitFor(async () => (await f.c.core.readNamespacedPod({name: 'fine', namespace: f.ns})).status?.containerStatuses?.[0]?.state?.terminated, 'the next pod ended', 30_000)
      expect(fine).toMatchObject({exitCode: 3, reason: 'Error'})
    },
    90_000,
  )
})

import {afterAll, beforeAll, expect} from '@jest/globals'
import {KubectlFixture} from './kubectl-fixture.js'
import {existsSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {describeE2e, runDir, stopAllVnodes, testWhen, uniqueName, waitFor} from './helpers.js'

/**
 * In a pod sandbox the container's program is PID 1 of its PID namespace,
 * as under a kubelet: the kernel does not deliver a signal it has no
 * handler for from inside the namespace, SIGKILL included, so a shell that
 * `kill -9`s itself lives on and exits 0.
 */
/** An image map of busybox's own image: its entrypoint the host's busybox, its PATH (what the conformance corpus runs). */
/** The pods run the host's /bin/busybox (Debian's busybox-static; .ci/run installs it). */
const withBusybox = testWhen(existsSync('/bin/busybox'), 'the pods run /bin/busybox: apt-get install busybox-static')

const BusyboxMap = 'images:\n  "busybox*":\n    command: [/bin/busybox]\n    args: [sh]\n    env: {PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}\n'

describeE2e.each([
  ['the built-in image map', false],
  ["busybox's image as a map entry", true],
])('pod sandbox: the container program is PID 1 (%s)', (_, mapped) => {
  const f = new KubectlFixture('sbx-pid1')

  beforeAll(async () => {
    const images = join(runDir(), `${uniqueName('images')}.yaml`)
    writeFileSync(images, BusyboxMap)
    await f.setUp(['--sandbox', 'namespaces', ...(mapped ? ['--images', images] : [])])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  const finished = (name: string) =>
    waitFor(
      async () => {
        const t = (await f.json(name)).status?.containerStatuses?.[0]?.state?.terminated
        return t ? `${t.exitCode} ${t.reason}` : undefined
      },
      `${name} terminated`,
      30_000,
      250,
    )

  withBusybox.each([
    ['selfkill', ['/bin/busybox', 'sh', '-c', 'kill -9 $$$$']],
    ['selfkill-path', ['sh', '-c', 'kill -9 $$$$; exit 3']],
  ])('%s: a shell that kill -9s itself survives it (exit 0, or its own exit code)', async (name, command) => {
    await f.create({metadata: {name}, spec: {restartPolicy: 'Never', terminationGracePeriodSeconds: 1, containers: [{name: 'c', image: 'busybox', command}]}})
    expect(await finished(name)).toBe(name === 'selfkill' ? '0 Completed' : '3 Error')
  })

  withBusybox('the shell sees itself as PID 1', async () => {
    const out = f.out('pid1')
    await f.create({
      metadata: {name: 'pid'},
      spec: {restartPolicy: 'Never', terminationGracePeriodSeconds: 1, containers: [{name: 'c', image: 'busybox', command: ['/bin/busybox', 'sh', '-c', `echo $$$$ > ${out}`]}]},
    })
    expect(await finished('pid')).toBe('0 Completed')
    expect((await f.file('pid1')).trim()).toBe('1')
  })
})

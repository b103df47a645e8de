import {expect, test} from '@jest/globals'
import {describeE2e, kubectl, nodeWithNamespace, waitFor} from './helpers.js'
import {containerStatus, createPod, nodeContainer, podOn, readPod, waitPod} from './faults-helpers.js'

/** Writes bytes to a file in the emptyDir mounted at /scratch (its real path in a sandbox, under VNODE_VOLUME_ROOT without). */
const fill = (bytes: number) => `require('fs').writeFileSync((process.env.VNODE_VOLUME_ROOT || '') + '/scratch/fill', Buffer.alloc(${bytes}, 1)); setInterval(() => {}, 1000)`
/** Writes bytes of log to stdout, then idles. */
const chatter = (bytes: number) => `process.stdout.write('x'.repeat(${bytes}) + '\\n'); setInterval(() => {}, 1000)`
const MiB = 2 ** 20

/**
 * Local ephemeral storage limits, as the kubelet's eviction manager enforces
 * them every 10 s: an emptyDir over its sizeLimit, a pod over its
 * containers' `ephemeral-storage` limits, a container over its own. The pod
 * is evicted (Failed, reason Evicted, a Warning event with the kubelet's
 * message); the node's other pods keep running.
 */
describeE2e('local ephemeral storage: limits evicted as the kubelet does', () => {
  const f = nodeWithNamespace('storage')
  const {ns, node} = f

  const evicted = async (name: string, message: string) => {
    const p = await waitPod(f.c.core, ns, name, (x) => x.status?.phase === 'Failed', `${name} evicted`, 40_000)
    expect(p.status).toMatchObject({phase: 'Failed', reason: 'Evicted', message})
    for (const s of p.status!.containerStatuses!) expect(s.state?.terminated).toBeDefined()
    const events = await waitFor(async () => {
      const list = (await f.c.core.listNamespacedEvent({namespace: ns, fieldSelector: `involvedObject.name=${name}`})).items
      return list.some((e) => e.reason === 'Evicted') ? list : undefined
    }, `the Evicted event of ${name}`)
    expect(events.filter((e) => e.reason === 'Evicted').map((e) => [e.type, e.message])).toEqual([['Warning', message]])
    return p
  }

  test('an emptyDir over its sizeLimit is evicted; a pod under its limits keeps running beside it', async () => {
    const scratch = {volumes: [{name: 'scratch', emptyDir: {sizeLimit: '1Mi'}}]}
    const mount = {volumeMounts: [{name: 'scratch', mountPath: '/scratch'}]}
    await createPod(f.c.core, podOn(node, ns, 'steady', [nodeContainer('app', fill(MiB / 4), {...mount, resources: {limits: {'ephemeral-storage': '10Mi'}}})], scratch))
    await createPod(f.c.core, podOn(node, ns, 'full', [nodeContainer('app', fill(2 * MiB), mount)], scratch))
    await evicted('full', 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ')
    // What users look at (kubectl's STATUS column shows the killed container's reason instead).
    const get = await kubectl(['get', 'pod', 'full', '-n', ns, '-o', 'jsonpath={.status.phase} {.status.reason}'])
    expect(get.stdout).toBe('Failed Evicted')
    // Measured at least once more after the eviction: still under its limits.
    await new Promise((r) => setTimeout(r, 11_000))
    const steady = await readPod(f.c.core, ns, 'steady')
    expect(steady?.status?.phase).toBe('Running')
    expect(containerStatus(steady, 'app')).toMatchObject({ready: true, restartCount: 0})
  }, 90_000)

  test("a pod whose logs exceed its containers' total limit is evicted with the pod's message", async () => {
    await createPod(f.c.core, podOn(node, ns, 'loud', [nodeContainer('app', chatter(2 * MiB), {resources: {limits: {'ephemeral-storage': '1Mi'}}})]))
    await evicted('loud', 'Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ')
  }, 60_000)

  test("a container over its own limit, while the pod's total holds, is evicted with the container's message", async () => {
    await createPod(
      f.c.core,
      podOn(node, ns, 'one-loud', [
        nodeContainer('loud', chatter(1.5 * MiB), {resources: {limits: {'ephemeral-storage': '1Mi'}}}),
        nodeContainer('quiet', 'setInterval(() => {}, 1000)', {resources: {limits: {'ephemeral-storage': '10Mi'}}}),
      ]),
    )
    await evicted('one-loud', 'Container loud exceeded its local ephemeral storage limit "1Mi". ')
  }, 60_000)
})

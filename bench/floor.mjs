// The floor: the irreducible work of running a pod on a node, done by the
// simplest client that can: watch, spawn the process, one status write; on
// deletion, kill, then delete. Same client QPS settings as vnode. vnode's
// figures are reported as ratios to this one, measured in the same run.
import {spawn} from 'node:child_process'
import * as k8s from '@kubernetes/client-node'
import {RateLimiter} from '../dist/emulator/kube/rate-limiter.js'

export async function startFloor(kc, nodeName, {qps = 50, burst = 100} = {}) {
  const limiter = new RateLimiter(qps, burst)
  const config = k8s.createConfiguration({
    baseServer: new k8s.ServerConfiguration(kc.getCurrentCluster().server, {}),
    authMethods: {default: kc},
    promiseMiddleware: [{pre: async (ctx) => (await limiter.acquire(), ctx), post: async (r) => r}],
  })
  const core = new k8s.CoreV1Api(config)
  const smp = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch)
  const procs = new Map()
  const watch = new k8s.Watch(kc)
  const onPod = async (type, pod) => {
    const {uid, name, namespace} = pod.metadata
    if (type === 'DELETED') return
    if (!procs.has(uid) && !pod.metadata.deletionTimestamp) {
      const c = pod.spec.containers[0]
      const child = spawn(c.command[0], c.command.slice(1), {stdio: 'ignore', detached: true})
      const exited = new Promise((r) => child.on('exit', r))
      procs.set(uid, {child, exited})
      const now = new Date().toISOString()
      await core.patchNamespacedPodStatus(
        {
          name,
          namespace,
          body: {
            metadata: {uid},
            status: {
              phase: 'Running',
              startTime: now,
              containerStatuses: [{name: c.name, image: c.image, imageID: '', ready: true, started: true, restartCount: 0, state: {running: {startedAt: now}}}],
            },
          },
        },
        smp,
      )
    } else if (pod.metadata.deletionTimestamp && procs.has(uid) && !procs.get(uid).deleting) {
      const p = procs.get(uid)
      p.deleting = true
      try {
        process.kill(-p.child.pid, 'SIGTERM')
      } catch {
        /* already gone */
      }
      await p.exited
      await core.deleteNamespacedPod({name, namespace, gracePeriodSeconds: 0, body: {preconditions: {uid}}}).catch(() => undefined)
      procs.delete(uid)
    }
  }
  const ctl = await watch.watch(
    '/api/v1/pods',
    {fieldSelector: `spec.nodeName=${nodeName}`},
    (t, p) => void onPod(t, p).catch(() => undefined),
    () => undefined,
  )
  return {
    async stop() {
      ctl.abort()
      for (const p of procs.values()) {
        try {
          process.kill(-p.child.pid, 'SIGKILL')
        } catch {
          /* gone */
        }
      }
      procs.clear()
    },
  }
}

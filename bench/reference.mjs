// The reference kubelet in the benchmark's own cluster: the conformance
// suite's node (a real kubelet, containerd, runc and the CNI bridge), started
// and stopped through its own module. The bench only asks whether it can run,
// runs pods on it, and reads what its runtime holds in memory.
import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {BusyboxImage} from '../test/conformance/images.mjs'
import {installPrerequisites, leftovers, missingPrerequisites, readState, startReferenceNode, stopReferenceNode} from '../test/conformance/reference-node.mjs'
import {memoryOf} from './memory.mjs'

/**
 * The pod both a kubelet and vnode run alike: busybox's shell as the
 * container's main process, which ends on SIGTERM (and takes its sleep with
 * it). As PID 1 of a container a plain `sleep` ignores SIGTERM and would wait
 * out the grace period, which is not what a delete burst measures.
 */
export function portableContainer() {
  return {
    name: 'c',
    image: BusyboxImage,
    imagePullPolicy: 'IfNotPresent',
    command: ['/bin/busybox', 'sh', '-c', "trap 'kill $!; exit 0' TERM; sleep 3600 & wait"],
  }
}

/** Why the reference node cannot run here, or undefined when it can (apt-getting what it needs, as root). */
export async function referenceUnavailable(log) {
  if (process.getuid?.() !== 0) return 'it needs root'
  try {
    await installPrerequisites(log)
  } catch (error) {
    return `installing its packages failed: ${error.shortMessage ?? error.message}`
  }
  const missing = missingPrerequisites()
  return missing.length > 0 ? `missing ${missing.join(', ')}` : undefined
}

/** Starts the reference node in cluster's control plane; stop() stops it and returns what it left behind. */
export async function startReference(cluster, name, log) {
  const dir = join(cluster.dir, 'reference')
  let stopped = false
  const stop = async () => {
    if (stopped) return []
    stopped = true
    await stopReferenceNode({dir, log}).catch((e) => log(`reference node stop: ${e.message}`))
    return leftovers(dir).catch((e) => [`leftovers unknown: ${e.message}`])
  }
  try {
    await startReferenceNode({clusterDir: join(cluster.dir, 'cluster'), dir, name, log})
  } catch (error) {
    // startReferenceNode stops what it started when it fails; stop() checks it did.
    const left = await stop()
    if (left.length > 0) log(`reference node left behind: ${left.join(', ')}`)
    throw error
  }
  return {
    name,
    dir,
    stop,
    /** kubelet + containerd + shims (the pause and container processes are the pods'). */
    async memory() {
      const r = await readState(dir)
      return memoryOf([r.pids.kubelet, r.pids.containerd, ...shimPids(dir)].filter(Boolean))
    },
  }
}

/** containerd-shim processes of this node: their argv names its directory. */
function shimPids(dir) {
  const out = []
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    let argv
    try {
      argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')
    } catch {
      continue
    }
    if (argv[0]?.includes('containerd-shim') && argv.some((a) => a.startsWith(dir))) out.push(Number(p))
  }
  return out
}

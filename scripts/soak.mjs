// Churn soak: one `kubectl vnode up` process under continuous pod
// create/delete churn, reporting its resident memory growth (goal: under 5%)
// and, once the churn stops, whether per-pod state, watches and file
// descriptors are back where they started.
//
//   npm run soak                      10 minutes on a control plane of its own
//   npm run soak -- --minutes 2       shorter
//   npm run soak -- --pods 30         pods per churn wave (default 20)
//
// Memory is compared after a warm-up (a fifth of the run, at least 30 s):
// V8 sizes its heap during the first waves, which is not a leak. vnode runs
// with --expose-gc, so each sample (a SIGUSR2 stats line) follows a full
// collection: both its resident memory and its live heap are reported, and
// the goal applies to resident memory.
import {readdirSync} from 'node:fs'
import {parseArgs} from 'node:util'
import {procUsage, sleep, sleeperPod, startCluster, startVnode} from '../bench/lib.mjs'

export const GoalGrowthPercent = 5
const SampleEveryMs = 10_000

const {values} = parseArgs({options: {minutes: {type: 'string', default: '10'}, pods: {type: 'string', default: '20'}}})
const minutes = Number(values.minutes)
const wave = Number(values.pods)
if (!(minutes > 0) || !(wave > 0)) {
  process.stderr.write('error: --minutes and --pods must be positive numbers\n')
  process.exit(1)
}

const fds = (pid) => readdirSync(`/proc/${pid}/fd`).length
const mib = (b) => (b / 1024 / 1024).toFixed(1)
const log = (msg) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`)

// Only the vnode process needs it; the control plane's processes ignore NODE_OPTIONS.
process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --expose-gc`.trim()
const cluster = startCluster()
let vn
let exitCode = 0
try {
  vn = startVnode(cluster, 'soak', ['--pods', String(wave * 2 + 10)])
  await vn.ready()
  const ns = 'soak'
  await cluster.core.createNamespace({body: {metadata: {name: ns}}})
  await sleep(3000)
  const start = {fds: fds(vn.child.pid), stats: await vn.stats()}

  const endAt = Date.now() + minutes * 60_000
  const warmUpUntil = Date.now() + Math.max(30_000, (minutes * 60_000) / 5)
  let baseline
  let heapBaseline
  const samples = []
  const heapSamples = []
  let lastSample = 0
  let waves = 0
  let seq = 0
  const pods = () => cluster.core.listNamespacedPod({namespace: ns}).then((l) => l.items)
  while (Date.now() < endAt) {
    // One wave: create, let some start, delete with mixed grace periods (some before they started).
    const names = Array.from({length: wave}, () => `churn-${seq++}`)
    await Promise.all(names.map((name, i) => cluster.core.createNamespacedPod({namespace: ns, body: sleeperPod(name, 'soak', {terminationGracePeriodSeconds: i % 3})})))
    await sleep(500 + Math.random() * 2500)
    await Promise.all(names.map((name, i) => cluster.core.deleteNamespacedPod({name, namespace: ns, ...(i % 2 ? {gracePeriodSeconds: 0} : {})}).catch(() => undefined)))
    for (let t = 0; t < 120 && (await pods()).length > 0; t++) await sleep(500)
    waves++
    const now = Date.now()
    if (now >= warmUpUntil && now - lastSample >= SampleEveryMs) {
      lastSample = now
      const {memory} = await vn.stats()
      const rss = memory.rssBytes
      baseline ??= rss
      heapBaseline ??= memory.heapUsedBytes
      samples.push(rss)
      heapSamples.push(memory.heapUsedBytes)
      log(`wave ${waves}: rss ${mib(rss)} MiB (${(((rss - baseline) / baseline) * 100).toFixed(1)}% from ${mib(baseline)} MiB), live heap ${mib(memory.heapUsedBytes)} MiB, fds ${fds(vn.child.pid)}`)
    }
  }

  // Settled: the last wave's events written, and the API sockets of its burst closed (idle for 15 s).
  await sleep(20_000)
  const end = {fds: fds(vn.child.pid), stats: await vn.stats(), usage: procUsage(vn.child.pid)}
  // The end of the run: the median of the last three samples, so one GC timing does not decide.
  const tail = samples.slice(-3).sort((a, b) => a - b)
  const final = tail[Math.floor(tail.length / 2)] ?? end.stats.memory.rssBytes
  baseline ??= final
  const growth = ((final - baseline) / baseline) * 100
  const heapTail = heapSamples.slice(-3).sort((a, b) => a - b)
  const heapFinal = heapTail[Math.floor(heapTail.length / 2)] ?? end.stats.memory.heapUsedBytes
  heapBaseline ??= heapFinal
  const podState = end.stats.podState
  const leftover = podState ? podState.status + podState.workers + podState.runtime : 0
  const summary = {
    minutes,
    waves,
    pods: seq,
    rss: {baselineMiB: Number(mib(baseline)), finalMiB: Number(mib(final)), maxMiB: Number(mib(Math.max(...samples, final))), growthPercent: Number(growth.toFixed(2))},
    goalPercent: GoalGrowthPercent,
    liveHeap: {baselineMiB: Number(mib(heapBaseline)), finalMiB: Number(mib(heapFinal)), growthPercent: Number((((heapFinal - heapBaseline) / heapBaseline) * 100).toFixed(2))},
    fds: {start: start.fds, end: end.fds},
    openWatches: {start: start.stats.openWatches, end: end.stats.openWatches},
    podStateAfter: podState,
    cpuSeconds: end.usage.cpuSeconds,
  }
  process.stdout.write(`${JSON.stringify(summary)}\n`)
  const verdicts = [
    [growth < GoalGrowthPercent, `resident memory growth ${growth.toFixed(2)}% (goal < ${GoalGrowthPercent}%)`],
    [leftover === 0, `per-pod state after the churn: ${JSON.stringify(podState)}`],
    [end.stats.openWatches === start.stats.openWatches, `open watches ${start.stats.openWatches} -> ${end.stats.openWatches}`],
    [end.fds <= start.fds + 2, `file descriptors ${start.fds} -> ${end.fds}`],
  ]
  for (const [ok, what] of verdicts) log(`${ok ? 'ok  ' : 'FAIL'} ${what}`)
  if (verdicts.some(([ok]) => !ok)) exitCode = 1
} catch (error) {
  process.stderr.write(`error: ${error.message}\n`)
  exitCode = 1
} finally {
  if (vn) await vn.stop()
  cluster.stop()
}
process.exit(exitCode)

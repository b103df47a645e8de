import {containerProbes, probeEffect} from '../probes/effects.js'
import {ProbeWorker, type ProbeKind, type ProbeResult} from '../probes/worker.js'
import type {ContainerProcess} from '../process/container-process.js'
import {handlerContext} from './hooks.js'
import type {ContainerHost} from './host.js'
import type {ContainerState} from './state.js'
import {stopContainer} from './stop.js'

/** Starts the probe workers of a running instance, on the ticks of the pod's first sync (the kubelet's worker tickers). */
export function startProbes(host: ContainerHost, c: ContainerState, proc: ContainerProcess): void {
  const hctx = handlerContext(proc, host.sandbox.net.handlerHost, c.spec.ports ?? [], host.sandbox.cgroup.containerProcsFiles(c.name))
  for (const [kind, probe] of containerProbes(c)) {
    const w = new ProbeWorker(
      kind,
      probe,
      hctx,
      proc.startedAt,
      {
        started: () => c.started,
        onResult: (k, r) => onProbeResult(host, c, proc, k, r),
        event: (type, reason, message) => host.event(c, type, reason, message),
      },
      {tickerStartedAt: host.createdAt, clock: host.clock},
    )
    c.addProbe(w)
    w.start()
  }
}

/** A verdict acts on the instance it was made for only (probes/effects.ts says what it does). */
function onProbeResult(host: ContainerHost, c: ContainerState, proc: ContainerProcess, kind: ProbeKind, result: ProbeResult): void {
  if (c.proc !== proc) return
  const e = probeEffect(c, kind, result, {terminating: host.end.isTerminating, restartPolicy: host.pod.spec?.restartPolicy ?? 'Always'})
  if (e.effect === 'ready') c.probed({ready: e.ready})
  if (e.effect === 'started') {
    c.probed({started: true, ready: e.ready})
    c.probes.find((p) => p.kind === 'readiness')?.trigger()
    void host.kick()
  }
  if (e.effect === 'kill') {
    if (e.restarts) c.killToRestart(c.status(host.defaultWaiting(), host.clock.now()))
    void stopContainer(host, c, e.message, e.graceMs ?? host.podGraceMs())
  }
  host.publish()
}

import {EventReason} from '../../kube/event-reasons.js'
import {handlerContext, runPreStop} from './hooks.js'
import type {ContainerHost} from './host.js'
import type {ContainerState} from './state.js'

/** The kubelet's minimumGracePeriodInSeconds: every container gets at least this after SIGTERM. */
export const MinimumKillGraceMs = 2_000

/**
 * Stops one container: Killing event, preStop within the grace, SIGTERM to
 * its process group, SIGKILL at the deadline (never sooner than 2 s after
 * SIGTERM). A second call can only move the deadline closer. An instance
 * whose main process has exited (its output still draining) gets no
 * Killing and no preStop, as the kubelet kills only running containers;
 * what it left in its process group or cgroup still goes. A failed
 * postStart hook's kill has its Killing all the same: the kubelet kills
 * the container it just started without asking the runtime its state.
 */
export function stopContainer(host: ContainerHost, c: ContainerState, message: string, graceMs: number, {killingWhenExited = false} = {}): Promise<void> {
  const clock = host.clock
  c.stopDeadline.moveTo(Math.min(clock.now() + graceMs, host.end.deadline))
  if (c.stopping) return c.stopping
  host.seeExit(c)
  const proc = c.proc
  if (!proc) return Promise.resolve()
  const running = proc.runsNow()
  if (running || killingWhenExited) host.event(c, 'Normal', EventReason.KillingContainer, message)
  const stopping = (async () => {
    const preStop = c.spec.lifecycle?.preStop
    if (running && preStop && c.stopDeadline.at > clock.now()) {
      const failed = await runPreStop(
        preStop,
        handlerContext(proc, host.sandbox.net.handlerHost, c.spec.ports ?? [], host.sandbox.cgroup.containerProcsFiles(c.name)),
        proc,
        c.stopDeadline,
        clock.now(),
      )
      if (failed) host.event(c, 'Warning', EventReason.FailedPreStopHook, 'PreStopHook failed')
    }
    const sigtermAt = clock.now()
    await proc.terminate(() => Math.max(c.stopDeadline.at, sigtermAt + MinimumKillGraceMs))
    // Whatever escaped the process group is still in the container's cgroup.
    await host.sandbox.cgroup.drained(c.name)
  })()
  c.stopBegun(stopping)
  return stopping.finally(() => {
    c.stopEnded()
    host.syncAtNextRelist()
    host.kick()
  })
}

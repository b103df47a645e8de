import type {SandboxMonitor} from '../process/helper-runner.js'
import {isLiveProcess, readStat} from '../process/proc.js'
import {spawnSandboxed} from './spawn.js'

/**
 * The holder of a pod's shared PID namespace (`shareProcessNamespace:
 * true`), as the kubelet's pause container: bwrap's reaper is its PID 1 and
 * reaps orphans; every container of the pod joins it (spec.pidNamespaceOf)
 * and none of them is PID 1. It lives as long as the pod's sandbox.
 */
export interface PidNamespaceHolder {
  /** Host pid of the namespace's PID 1. */
  pid: number
  startTicks: number
}

export const HolderProgram = ['sleep', 'infinity']

export async function startPidNamespaceHolder(hostname: string): Promise<PidNamespaceHolder & {monitor: SandboxMonitor}> {
  const started = await spawnSandboxed({
    argv: HolderProgram,
    env: {PATH: '/usr/bin:/bin'},
    cwd: '/',
    sandbox: {hostname, binds: [], hide: [], init: true},
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'ignore',
  })
  return {pid: started.pid, startTicks: readStat(started.pid)?.startTime ?? 0, monitor: started.monitor}
}

/** The holder recorded is still that process (pid reuse check). */
export function holderAlive(h: PidNamespaceHolder | undefined): boolean {
  return !!h && isLiveProcess(h.pid, h.startTicks)
}

export function stopPidNamespaceHolder(h: PidNamespaceHolder | undefined): void {
  if (!holderAlive(h)) return
  try {
    process.kill(h!.pid, 'SIGKILL')
  } catch {
    /* gone */
  }
}

import {EventReason} from '../../kube/event-reasons.js'
import type {V1ContainerStatus} from '@kubernetes/client-node'
import {randomBytes} from 'node:crypto'
import {mkdir, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import {containerLogFile} from '../logs/layout.js'
import {nextRelist} from '../pod/sync-clock.js'
import {StartError, StartErrorExitCode, StartErrorReason} from '../process/command-errors.js'
import {ContainerProcess} from '../process/container-process.js'
import {startFrom} from '../sandbox/mount-base.js'
import {containerConfig, type ContainerConfig} from './config.js'
import {handlerContext, runPostStart} from './hooks.js'
import type {ContainerHost} from './host.js'
import type {ContainerState} from './state.js'
import {stopContainer} from './stop.js'

/**
 * Starts one instance of a container, the kubelet's startContainer:
 *  1. its config (image, program, env, file view, argv): a failure waits on this sync;
 *  2. its termination message file, empty;
 *  3. its log path and IDs: the instance is Created;
 *  4. on the host network, a warning for host ports already taken;
 *  5. its cgroup, then the spawn into it (a sandbox's PID 1 is held until placed);
 *  6. a spawn the runtime refused: StartError, RunContainerError until the next sync;
 *  7. it runs, unseen until the relist after its program runs;
 *  8. Started, then its probes once it can be entered;
 *  9. postStart (inside this sync, as the kubelet runs it): a failure kills the instance.
 */
export async function startContainer(host: ContainerHost, c: ContainerState): Promise<void> {
  const config = await configure(host, c)
  if (!config || host.end.finished) return
  await writeTerminationFile(config.terminationFile)
  if (host.end.finished) return
  // What the status showed until now: it still does until the start is seen.
  const before = c.status(host.defaultWaiting(), host.clock.now())
  create(host, c, config)
  if (!host.sandbox.net.enabled) await host.deps.checkHostPorts?.(host.pod, c)
  const proc = await spawn(host, c, config)
  if (!proc) return
  c.run(proc, before)
  host.publishWhenObserved()
  host.event(c, 'Normal', EventReason.StartedContainer, `Started container ${c.name}`)
  host.watchProcess(c, proc)
  await runPostStartStep(host, c, proc, before)
}

/** Step 1: the container's config; a failure is Failed on every sync, as the kubelet's startContainer records it. */
async function configure(host: ContainerHost, c: ContainerState): Promise<ContainerConfig | undefined> {
  const {deps, sandbox, pod} = host
  const config = await containerConfig({
    pod,
    c,
    containers: host.containers,
    ctx: deps.ctx,
    images: deps.images,
    node: deps.node,
    path: deps.path,
    sandbox: sandbox.dir,
    sandboxMode: deps.sandboxMode,
    walls: deps.walls,
    volumes: sandbox.volumes!,
    podFiles: sandbox.podFiles(),
    netns: sandbox.net.netns,
    podIP: sandbox.net.attachment?.ip,
    sharedPid: async () => (await sandbox.sharedPidNamespace()).pid,
    event: (type, reason, message) => host.event(c, type, reason, message),
    podEvent: (type, reason, message) => host.podEvent(type, reason, message),
  })
  if (!config.ok) {
    host.event(c, 'Warning', EventReason.FailedToStartContainer, config.event ?? `Error: ${config.message}`)
    c.waitWith({reason: config.reason, message: config.message})
    host.retrySyncLater()
    return undefined
  }
  sandbox.addLinks(config.links)
  return config
}

/** Step 2: the termination message file exists, empty, before the program runs. */
/** On libuv's threads: a burst's file work stays off the event loop every other pod's sync waits on. */
async function writeTerminationFile(path: string): Promise<void> {
  await mkdir(dirname(path), {recursive: true, mode: 0o700})
  await writeFile(path, '', {mode: 0o600})
}

/** Step 3: the instance's log (named by its restartCount: how many instances ran before it) and IDs; Created. */
function create(host: ContainerHost, c: ContainerState, config: ContainerConfig): void {
  const m = host.pod.metadata!
  const logPath = containerLogFile(host.deps.ctx.stateDir, m.namespace!, m.name!, m.uid!, c.name, c.instances)
  c.created({containerID: `vnode://${randomBytes(32).toString('hex')}`, imageID: config.imageID, logPath, terminationFile: config.terminationFile})
  host.retryAt(0)
  host.event(c, 'Normal', EventReason.CreatedContainer, `Created container: ${c.name}`)
}

/** Steps 5 and 6: the container's cgroup and the process placed in it before its program runs; any error fails the start and the sync. */
async function spawn(host: ContainerHost, c: ContainerState, config: ContainerConfig): Promise<ContainerProcess | undefined> {
  const {deps, sandbox, pod} = host
  try {
    const cgroup = sandbox.cgroup.createContainer(pod, c.name, c.spec, c.containerID!)
    const pipes = join(sandbox.dir, 'io', `${c.name}-${c.restartCount}`)
    await mkdir(dirname(pipes), {recursive: true, mode: 0o700})
    const {cgroups} = deps
    return await ContainerProcess.start({
      argv: config.argv,
      env: config.env,
      cwd: config.cwd,
      logPath: c.logPath!,
      pipes,
      rotation: deps.rotation,
      fifos: deps.fifos,
      stdin: c.spec.stdin === true,
      tty: c.spec.tty === true,
      sandbox: config.view && startFrom(config.view, await deps.mountBase?.(config.view.binds)),
      clock: host.clock,
      lookPeriodMs: deps.sync.relistPeriodMs,
      // Into the container's cgroup before its program runs: a bare process places itself (process/placed-argv.ts), a
      // sandbox's PID 1 is placed by the helper while it is held; else it is placed right after its spawn.
      cgroupProcs: cgroup ? cgroups!.procsFiles(cgroup) : undefined,
      place: cgroup ? (pid) => cgroups!.place(cgroup, pid) : undefined,
    })
  } catch (thrown) {
    sandbox.cgroup.discard(c.name)
    // Whatever failed once the instance was created (its cgroup, its pipes, the spawn) fails its start, as any error of
    // the runtime's StartContainer does on a kubelet: the instance ends with StartError, never half-counted.
    const error = thrown instanceof StartError ? thrown : new StartError(thrown instanceof Error ? thrown.message : String(thrown))
    const now = new Date(host.clock.now())
    host.event(c, 'Warning', EventReason.FailedToStartContainer, `Error: ${error.message}`)
    // The sync failed: a container that will be restarted waits with the runtime's error until the next sync, then backs off.
    c.startFailed({exitCode: StartErrorExitCode, reason: StartErrorReason, message: error.message, startedAt: now, finishedAt: now, containerID: c.containerID}, error.message)
    host.writeRecord()
    host.retrySyncLater()
    return undefined
  }
}

/**
 * Steps 7 and 9: not seen before its program runs (a sandbox is still being
 * built), and then at the next relist; with a postStart hook, only once the
 * hook is over. The kubelet runs the hook inside the sync that started the
 * container, and a failed hook's kill too: nothing of this start is reported
 * until that sync is over.
 */
async function runPostStartStep(host: ContainerHost, c: ContainerState, proc: ContainerProcess, before: V1ContainerStatus): Promise<void> {
  const hctx = handlerContext(proc, host.sandbox.net.handlerHost, c.spec.ports ?? [], host.sandbox.cgroup.containerProcsFiles(c.name))
  const postStart = c.spec.lifecycle?.postStart
  await proc.entered()
  if (postStart) {
    const failure = await runPostStart(postStart, hctx, c.name, host.pod, host.end.signal)
    if (failure && c.proc === proc && !host.end.signal.aborted) {
      host.event(c, 'Warning', EventReason.FailedPostStartHook, `PostStartHook failed`)
      c.waitAfterExit(failure)
      await stopContainer(host, c, `FailedPostStartHook`, host.podGraceMs(), {killingWhenExited: true})
      // The failed sync ends here; the container's exit brings the next one with the relist.
      host.retryAt(nextRelist(host.clock.now() + 1, host.deps.sync))
      return
    }
  }
  if (c.proc === proc) {
    c.seenAt(nextRelist(host.clock.now(), host.deps.sync), before)
    host.publishWhenObserved()
  }
}

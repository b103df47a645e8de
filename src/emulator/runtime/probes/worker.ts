import type {V1Probe} from '@kubernetes/client-node'
import {RealClock, type Clock, type ClockTimer} from '../../../common/clock.js'
import {EventReason} from '../../kube/event-reasons.js'
import {runProbeAction, type HandlerContext} from './handlers.js'

export type ProbeKind = 'liveness' | 'readiness' | 'startup'
export type ProbeResult = 'Success' | 'Failure' | 'Unknown'

/** The API defaults, for probes that did not come through the API server. */
export const DefaultProbePeriodSeconds = 10
export const DefaultProbeFailureThreshold = 3
export const DefaultProbeSuccessThreshold = 1

const Titles: Record<ProbeKind, string> = {liveness: 'Liveness', readiness: 'Readiness', startup: 'Startup'}

/** The cached result a new container instance starts with (prober worker). */
export function initialResult(kind: ProbeKind): ProbeResult {
  return kind === 'readiness' ? 'Failure' : kind === 'liveness' ? 'Success' : 'Unknown'
}

export interface ProbeCallbacks {
  /** Whether the container has started (startup probe passed, or none). */
  started(): boolean
  /** The cached result changed (or a liveness/startup threshold was reached). */
  onResult(kind: ProbeKind, result: ProbeResult): void
  event(type: 'Warning', reason: string, message: string): void
}

export interface ProbeTiming {
  /** When the kubelet would have made this worker's ticker (the pod's first sync): probes come on its ticks. Now by default. */
  tickerStartedAt?: number
  clock?: Clock
}

/**
 * One probe of one container instance, with the kubelet's worker rules: a
 * tick every periodSeconds, nothing before initialDelaySeconds after the
 * start, only the startup probe until the container has started, the result
 * flips after failureThreshold / successThreshold consecutive results, and
 * after a liveness failure or any startup verdict the worker holds until the
 * container is replaced (a new worker).
 */
export class ProbeWorker {
  result: ProbeResult
  private lastResult: ProbeResult = 'Unknown'
  private resultRun = 0
  private onHold = false
  private running = false
  private timer: ClockTimer | undefined
  private readonly clock: Clock
  private readonly tickerStartedAt: number
  private stopped = false

  constructor(
    readonly kind: ProbeKind,
    private readonly probe: V1Probe,
    private readonly ctx: HandlerContext,
    private readonly startedAt: Date,
    private readonly cb: ProbeCallbacks,
    timing: ProbeTiming = {},
  ) {
    this.clock = timing.clock ?? RealClock
    this.tickerStartedAt = timing.tickerStartedAt ?? this.clock.now()
    this.result = initialResult(kind)
  }

  /** Probes on the worker's ticks: the first one at or after now, then every periodSeconds. */
  start(): void {
    const period = Math.max(1, this.probe.periodSeconds ?? DefaultProbePeriodSeconds) * 1000
    const now = this.clock.now()
    const wait = (period - ((now - this.tickerStartedAt) % period)) % period
    this.timer = this.clock.setTimeout(() => {
      if (this.stopped) return
      this.timer = this.clock.setInterval(() => void this.tick(), period)
      void this.tick()
    }, wait)
  }

  /** Probe now (the readiness worker is triggered when the startup probe succeeds). */
  trigger(): void {
    void this.tick()
  }

  stop(): void {
    this.stopped = true
    // clearTimeout clears either kind of timer.
    this.clock.clearTimeout(this.timer)
    this.timer = undefined
  }

  private async tick(): Promise<void> {
    if (this.stopped || this.onHold || this.running) return
    const started = this.cb.started()
    if (this.kind === 'startup' ? started : !started) return
    if (this.clock.now() - this.startedAt.getTime() < (this.probe.initialDelaySeconds ?? 0) * 1000) return
    this.running = true
    let outcome
    try {
      outcome = await runProbeAction(this.probe, this.ctx)
    } finally {
      this.running = false
    }
    if (this.stopped) return
    const title = Titles[this.kind]
    let result: ProbeResult = 'Success'
    if (outcome.result === 'failure') {
      result = 'Failure'
      this.cb.event('Warning', EventReason.ContainerUnhealthy, `${title} probe failed: ${outcome.output}`)
    } else if (outcome.result === 'warning') {
      this.cb.event('Warning', EventReason.ContainerProbeWarning, `${title} probe warning: ${outcome.output}`)
    }
    this.resultRun = this.lastResult === result ? this.resultRun + 1 : 1
    this.lastResult = result
    const failureThreshold = this.probe.failureThreshold ?? DefaultProbeFailureThreshold
    const successThreshold = this.probe.successThreshold ?? DefaultProbeSuccessThreshold
    if ((result === 'Failure' && this.resultRun < failureThreshold) || (result === 'Success' && this.resultRun < successThreshold)) return
    const changed = this.result !== result
    this.result = result
    if ((this.kind === 'liveness' && result === 'Failure') || this.kind === 'startup') {
      this.onHold = true
      this.resultRun = 0
    }
    if (changed || this.onHold) this.cb.onResult(this.kind, result)
  }
}

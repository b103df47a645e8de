import {render} from 'ink'
import {EnterAltScreen, LeaveAltScreen} from '../terminal.js'
import {Dashboard} from './Dashboard.js'
import type {DashboardActions, DashboardFeed} from './feed.js'
import {DashboardStore} from './store.js'

/** Ink never needs to draw faster than the store publishes. */
export const DashboardMaxFps = 10

export interface DashboardHandle {
  store: DashboardStore
  /** Restores the terminal; safe to call more than once. */
  unmount(): void
}

/**
 * The `up` dashboard on a terminal: the alternate screen (the shell's screen
 * comes back on exit), raw keys, redraws only when the store publishes.
 */
export function startDashboard(feed: DashboardFeed, opts: {nodeName: string; actions: DashboardActions; stdout?: NodeJS.WriteStream}): DashboardHandle {
  const stdout = opts.stdout ?? process.stdout
  const store = new DashboardStore(feed, {nodeName: opts.nodeName}).start()
  stdout.write(EnterAltScreen)
  const app = render(<Dashboard store={store} actions={opts.actions} stateDir={feed.stateDir} />, {
    stdout,
    exitOnCtrlC: false,
    maxFps: DashboardMaxFps,
    incrementalRendering: true,
  })
  let done = false
  return {
    store,
    unmount() {
      if (done) return
      done = true
      app.unmount()
      store.dispose()
      stdout.write(LeaveAltScreen)
    },
  }
}

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
  const app = render(<Dashboard store={store} actions={opts.actions} logs={feed.containerLogs} />, {
    stdout,
    exitOnCtrlC: false,
    maxFps: DashboardMaxFps,
  })
  let done = false
  // An exit that skips unmount (a second ctrl-c during shutdown) must still give the shell its screen back.
  const restore = () => {
    if (!done) stdout.write(LeaveAltScreen)
  }
  process.once('exit', restore)
  return {
    store,
    unmount() {
      if (done) return
      done = true
      process.off('exit', restore)
      const last = store.latest()
      app.unmount()
      store.dispose()
      stdout.write(LeaveAltScreen)
      // What happened stays on the normal screen once the dashboard is gone.
      for (const s of last.stopping) stdout.write(`${last.nodeName}: ${s}\n`)
      for (const e of last.errors.slice(-3)) stdout.write(`${last.nodeName}: error: ${e}\n`)
    },
  }
}

import type {V1Pod} from '@kubernetes/client-node'
import {render} from 'ink'
import type {StartWatch} from '../../kubectl/pod-watch.js'
import {PodWatchStore} from './watch-store.js'
import {WatchTable} from './WatchTable.js'

export async function runPodWatchApp(pods: V1Pod[], opts: {wide: boolean; allNamespaces: boolean; namespace: string}, start: StartWatch): Promise<void> {
  const store = new PodWatchStore(pods)
  const handle = start(store.apply)
  const app = render(<WatchTable store={store} {...opts} />, {exitOnCtrlC: false, maxFps: 10})
  const stop = () => app.unmount()
  process.once('SIGTERM', stop)
  try {
    await Promise.race([app.waitUntilExit(), handle.done])
  } finally {
    process.off('SIGTERM', stop)
    handle.stop()
    app.unmount()
    store.dispose()
  }
}

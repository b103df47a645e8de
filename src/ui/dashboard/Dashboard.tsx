import type {ContainerLogs} from '../../emulator/provider/logs.js'
import {Box, Text, useInput} from 'ink'
import {useReducer, useRef, useSyncExternalStore} from 'react'
import {Details} from './Details.js'
import {EventFeed} from './EventFeed.js'
import type {DashboardActions} from './feed.js'
import {Footer, type Mode} from './Footer.js'
import {Header} from './Header.js'
import {Help} from './Help.js'
import {keyAction} from './keys.js'
import {LogPane, useLogTail} from './LogPane.js'
import {PodTable} from './PodTable.js'
import type {DashboardStore, PodView} from './store.js'
import {useTerminalSize} from './use-terminal-size.js'

export interface DashboardProps {
  store: DashboardStore
  actions: DashboardActions
  /** The node's container logs, for the log pane. */
  logs?: ContainerLogs
}

interface UiState {
  mode: Mode
  selectedUid?: string
  confirm?: Confirm
  note?: string
}

interface Confirm {
  uid: string
  namespace: string
  name: string
  force: boolean
}

/** Lines taken by everything but the table and the lower pane. */
const HeaderLines = 4
const FooterLines = 1

export function Dashboard({store, actions, logs}: DashboardProps) {
  const model = useSyncExternalStore(store.subscribe, store.getSnapshot)
  const {columns, rows} = useTerminalSize()
  // UI state lives in a ref that key handling reads and writes directly: keys typed faster than
  // React re-renders never act on a stale selection or mode. bump() redraws.
  const ui = useRef<UiState>({mode: 'table'})
  const [, bump] = useReducer((n: number) => n + 1, 0)
  const set = (patch: Partial<UiState>) => {
    Object.assign(ui.current, patch)
    bump()
  }
  const {mode, confirm, note} = ui.current

  const selectedIndex = (rowsNow: PodView[]) => {
    // The selection follows the pod, not the line: sorting or new pods do not move it.
    const i = rowsNow.findIndex((r) => r.uid === ui.current.selectedUid)
    return i < 0 ? 0 : i
  }
  const selected = selectedIndex(model.rows)
  const current: PodView | undefined = model.rows[selected]
  const logLines = useLogTail(mode === 'logs' ? logs : undefined, mode === 'logs' ? current?.pod : undefined)

  const kill = async (c: Confirm) => {
    set({note: `${c.force ? 'force ' : ''}kill requested: ${c.namespace}/${c.name}`})
    try {
      await actions.deletePod(c.namespace, c.name, {force: c.force})
    } catch (error) {
      set({note: `kill ${c.namespace}/${c.name} failed: ${(error as Error).message}`})
    }
  }
  const quit = () => {
    set({mode: 'quitting'})
    actions.quit()
  }

  useInput((input, key) => {
    const now = ui.current
    const rowsNow = store.getSnapshot().rows
    const sel = selectedIndex(rowsNow)
    const cur = rowsNow[sel]
    const move = (delta: number) => {
      const next = rowsNow[Math.max(0, Math.min(rowsNow.length - 1, sel + delta))]
      if (next) set({selectedUid: next.uid})
    }
    if (key.ctrl && input === 'c') return quit()
    if (now.mode === 'quitting') return
    if (now.mode === 'confirm') {
      if (now.confirm && input === 'y') void kill(now.confirm)
      else set({note: 'kill cancelled'})
      return set({confirm: undefined, mode: 'table'})
    }
    if (now.mode === 'help') {
      if (key.escape || input === '?' || input === 'q') set({mode: 'table'})
      return
    }
    const action = keyAction(input, key)
    switch (action) {
      case 'quit':
        return quit()
      case 'help':
        return set({mode: 'help'})
      case 'up':
        return move(-1)
      case 'down':
        return move(1)
      case 'pageUp':
        return move(-10)
      case 'pageDown':
        return move(10)
      case 'back':
        return set({mode: 'table'})
      case 'sort':
        return store.cycleSort()
      case 'reverseSort':
        return store.reverseSort()
    }
    if (!cur) return
    switch (action) {
      case 'details':
        return set({mode: now.mode === 'details' ? 'table' : 'details', selectedUid: cur.uid})
      case 'logs':
        return set({mode: now.mode === 'logs' ? 'table' : 'logs', selectedUid: cur.uid})
      case 'kill':
      case 'forceKill':
        return set({mode: 'confirm', selectedUid: cur.uid, confirm: {uid: cur.uid, namespace: cur.namespace, name: cur.name, force: action === 'forceKill'}})
    }
  })

  const body = Math.max(4, rows - HeaderLines - FooterLines - 1)
  const paneOpen = mode === 'details' || mode === 'logs'
  const tableHeight = paneOpen ? Math.max(3, Math.floor(body / 3)) : Math.max(3, Math.floor((body * 2) / 3))
  const lower = Math.max(2, body - tableHeight - 2)

  // Exactly the terminal's height: Ink then draws each frame from the top-left corner (clear and
  // redraw) rather than relative to where it thinks its last frame ended, so a line another program
  // writes on this terminal is wiped by the next frame instead of shifting every later frame down.
  return (
    <Box flexDirection="column" width={columns} height={rows}>
      <Header model={model} />
      <Box marginTop={1}>{mode === 'help' ? <Help /> : <PodTable model={model} selected={selected} width={columns} height={tableHeight} />}</Box>
      <Box marginTop={1} flexDirection="column" height={lower}>
        {mode === 'details' && current ? <Details pod={current.pod} events={model.events} now={model.now} height={lower} /> : null}
        {mode === 'logs' && current ? <LogPane pod={current.pod} lines={logLines} height={lower} /> : null}
        {mode === 'confirm' && confirm ? (
          <Text color="yellow" bold>
            {confirm.force ? 'Force kill (grace period 0)' : 'Kill'} pod {confirm.namespace}/{confirm.name}? (y/N)
          </Text>
        ) : null}
        {mode === 'quitting' ? (
          <Box flexDirection="column">
            <Text color="yellow" bold>
              Shutting down node {model.nodeName}…
            </Text>
            {model.stopping.map((s, i) => (
              <Text key={i}> {s}</Text>
            ))}
          </Box>
        ) : null}
        {mode === 'table' || mode === 'help' ? <EventFeed events={model.events} errors={model.errors} height={lower - 1} /> : null}
      </Box>
      <Footer mode={mode} note={note} />
    </Box>
  )
}

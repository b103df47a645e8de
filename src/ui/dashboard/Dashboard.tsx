import {Box, Text, useInput} from 'ink'
import {useEffect, useState, useSyncExternalStore} from 'react'
import {Details} from './Details.js'
import {EventFeed} from './EventFeed.js'
import type {DashboardActions} from './feed.js'
import {Footer, type Mode} from './Footer.js'
import {Header} from './Header.js'
import {Help} from './Help.js'
import {LogPane, useLogTail} from './LogPane.js'
import {PodTable} from './PodTable.js'
import type {DashboardStore, PodView} from './store.js'
import {useTerminalSize} from './use-terminal-size.js'

export interface DashboardProps {
  store: DashboardStore
  actions: DashboardActions
  stateDir?: string
}

interface Confirm {
  uid: string
  namespace: string
  name: string
  force: boolean
}

/** Lines taken by everything but the table and the lower pane. */
const HeaderLines = 3
const FooterLines = 1

export function Dashboard({store, actions, stateDir}: DashboardProps) {
  const model = useSyncExternalStore(store.subscribe, store.getSnapshot)
  const {columns, rows} = useTerminalSize()
  const [mode, setMode] = useState<Mode>('table')
  const [selectedUid, setSelectedUid] = useState<string | undefined>()
  const [confirm, setConfirm] = useState<Confirm | undefined>()
  const [note, setNote] = useState<string | undefined>()

  // The selection follows the pod, not the line: sorting or new pods do not move it.
  let selected = model.rows.findIndex((r) => r.uid === selectedUid)
  if (selected < 0) selected = 0
  const current: PodView | undefined = model.rows[selected]
  useEffect(() => {
    if (current && current.uid !== selectedUid) setSelectedUid(current.uid)
  }, [current?.uid, selectedUid])
  const logLines = useLogTail(mode === 'logs' ? stateDir : undefined, mode === 'logs' ? current?.pod : undefined)

  const move = (delta: number) => {
    const next = model.rows[Math.max(0, Math.min(model.rows.length - 1, selected + delta))]
    if (next) setSelectedUid(next.uid)
  }
  const kill = async (c: Confirm) => {
    setNote(`${c.force ? 'force ' : ''}kill requested: ${c.namespace}/${c.name}`)
    try {
      await actions.deletePod(c.namespace, c.name, {force: c.force})
    } catch (error) {
      setNote(`kill ${c.namespace}/${c.name} failed: ${(error as Error).message}`)
    }
  }
  const quit = () => {
    setMode('quitting')
    actions.quit()
  }

  useInput((input, key) => {
    if (key.ctrl && input === 'c') return quit()
    if (mode === 'quitting') return
    if (mode === 'confirm') {
      if (confirm && input === 'y') void kill(confirm)
      else setNote('kill cancelled')
      setConfirm(undefined)
      setMode('table')
      return
    }
    if (mode === 'help') {
      if (key.escape || input === '?' || input === 'q') setMode('table')
      return
    }
    if (input === 'q') return quit()
    if (input === '?') return setMode('help')
    if (key.escape || key.backspace) return setMode('table')
    if (key.upArrow || input === 'k') return move(-1)
    if (key.downArrow || input === 'j') return move(1)
    if (key.pageUp) return move(-10)
    if (key.pageDown) return move(10)
    if (input === 's') return store.cycleSort()
    if (input === 'S') return store.reverseSort()
    if (!current) return
    if (key.return) return setMode(mode === 'details' ? 'table' : 'details')
    if (input === 'l') return setMode(mode === 'logs' ? 'table' : 'logs')
    if (input === 'x' || input === 'X') {
      setConfirm({uid: current.uid, namespace: current.namespace, name: current.name, force: input === 'X'})
      setMode('confirm')
    }
  })

  const body = Math.max(4, rows - HeaderLines - FooterLines - 1)
  const paneOpen = mode === 'details' || mode === 'logs'
  const tableHeight = paneOpen ? Math.max(3, Math.floor(body / 3)) : Math.max(3, Math.floor((body * 2) / 3))
  const lower = Math.max(2, body - tableHeight - 2)

  return (
    <Box flexDirection="column" width={columns}>
      <Header model={model} />
      <Box marginTop={1}>
        {mode === 'help' ? <Help /> : <PodTable model={model} selected={selected} width={columns} height={tableHeight} />}
      </Box>
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
              <Text key={i}>  {s}</Text>
            ))}
          </Box>
        ) : null}
        {mode === 'table' || mode === 'help' ? <EventFeed events={model.events} errors={model.errors} height={lower - 1} /> : null}
      </Box>
      <Footer mode={mode} note={note} />
    </Box>
  )
}

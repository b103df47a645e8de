import type {V1Pod} from '@kubernetes/client-node'
import {Box, Text, useApp, useInput} from 'ink'
import {useEffect, useSyncExternalStore} from 'react'
import {podCells, podsHeader} from '../../kubectl/pods-printer.js'
import {toneOf} from '../dashboard/store.js'
import {type Column, Table} from '../dashboard/Table.js'
import {useTerminalSize} from '../dashboard/use-terminal-size.js'
import {podReady, podStatus} from '../../kubectl/pod-status.js'
import type {PodWatchStore} from './watch-store.js'

/** Ages in the live table move once a second. */
export const WatchTickMs = 1000

export interface WatchTableProps {
  store: PodWatchStore
  wide: boolean
  allNamespaces: boolean
  namespace: string
}

export function watchRows(pods: V1Pod[], wide: boolean, allNamespaces: boolean, now = Date.now()) {
  return pods.map((p) => ({key: p.metadata?.uid ?? p.metadata?.name ?? '', cells: podCells(p, wide, allNamespaces, now), tone: toneOf(podStatus(p), podReady(p))}))
}

/** `kubectl vnode pods -w` on a terminal: the same columns, redrawn in place. */
export function WatchTable({store, wide, allNamespaces, namespace}: WatchTableProps) {
  const pods = useSyncExternalStore(store.subscribe, store.getSnapshot)
  const {columns, rows} = useTerminalSize()
  const {exit} = useApp()
  useInput((input, key) => {
    if (input === 'q' || key.escape || (key.ctrl && input === 'c')) exit()
  })
  useEffect(() => {
    const t = setInterval(() => store.touch(), WatchTickMs)
    return () => clearInterval(t)
  }, [store])
  const cols: Column[] = podsHeader(wide, allNamespaces).map((title) => ({title, flex: title === 'NAME' || title === 'NAMESPACE'}))
  return (
    <Box flexDirection="column">
      <Table
        columns={cols}
        rows={watchRows(pods, wide, allNamespaces)}
        width={columns}
        height={Math.max(3, rows - 3)}
        empty={allNamespaces ? 'No resources found' : `No resources found in ${namespace} namespace.`}
      />
      <Text dimColor>watching {pods.length} pods · q to quit</Text>
    </Box>
  )
}

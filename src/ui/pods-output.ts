import type {V1Pod} from '@kubernetes/client-node'
import type {StartWatch} from '../kubectl/pod-watch.js'
import {serializePod, serializePods, toYaml} from '../kubectl/serialize.js'
import {isInteractive} from './terminal.js'
import {podName, podsTable, PodWatchPrinter} from '../kubectl/pods-printer.js'

export type PodsFormat = 'table' | 'wide' | 'json' | 'yaml' | 'name'

export interface PodsOutputOptions {
  output: PodsFormat
  allNamespaces: boolean
  namespace: string
  out?: NodeJS.WritableStream
  err?: NodeJS.WritableStream
}

/** kubectl's wording, on stderr, when a table would be empty. */
export function noResourcesMessage(allNamespaces: boolean, namespace: string): string {
  return allNamespaces ? 'No resources found' : `No resources found in ${namespace} namespace.`
}

export async function printPods(pods: V1Pod[], o: PodsOutputOptions): Promise<void> {
  const out = o.out ?? process.stdout
  const err = o.err ?? process.stderr
  switch (o.output) {
    case 'json':
      out.write(`${JSON.stringify(await serializePods(pods), null, 4)}\n`)
      return
    case 'yaml':
      out.write(await toYaml(await serializePods(pods)))
      return
    case 'name':
      for (const p of pods) out.write(`${podName(p)}\n`)
      return
    default:
      if (pods.length === 0) {
        err.write(`${noResourcesMessage(o.allNamespaces, o.namespace)}\n`)
        return
      }
      out.write(`${podsTable(pods, {wide: o.output === 'wide', allNamespaces: o.allNamespaces}).join('\n')}\n`)
  }
}

/** The live Ink table only for the table formats on an interactive terminal. */
export function liveTableWanted(output: PodsFormat): boolean {
  return (output === 'table' || output === 'wide') && isInteractive()
}

/** Resolves on SIGINT / SIGTERM, which end a watch normally (exit 0, as kubectl get -w). */
function untilInterrupted(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done)
      process.off('SIGTERM', done)
      resolve()
    }
    process.on('SIGINT', done)
    process.on('SIGTERM', done)
  })
}

/** `kubectl get -w` when piped: the table once, then one appended row (or object) per change. */
export async function runPodWatchLines(pods: V1Pod[], o: PodsOutputOptions, start: StartWatch): Promise<void> {
  const out = o.out ?? process.stdout
  const printer = new PodWatchPrinter(o.output === 'wide', o.allNamespaces)
  const emit = async (pod: V1Pod) => {
    if (o.output === 'json') out.write(`${JSON.stringify(await serializePod(pod), null, 4)}\n`)
    else if (o.output === 'yaml') out.write(`---\n${await toYaml(await serializePod(pod))}`)
    else if (o.output === 'name') out.write(`${podName(pod)}\n`)
    else out.write(`${printer.row(pod)}\n`)
  }
  if (o.output === 'table' || o.output === 'wide') {
    if (pods.length === 0) (o.err ?? process.stderr).write(`${noResourcesMessage(o.allNamespaces, o.namespace)}\n`)
    out.write(`${printer.initial(pods).join('\n')}\n`)
  } else {
    for (const p of pods) await emit(p)
  }
  // Serialise writes so rows come out in event order.
  let chain = Promise.resolve()
  const handle = start((_type, pod) => {
    chain = chain.then(() => emit(pod))
  })
  await Promise.race([untilInterrupted(), handle.done])
  handle.stop()
  await chain
}

/** `-w` on a terminal: a live table (Ink) that redraws in place; q or ctrl-c ends it. */
export async function runLivePodTable(pods: V1Pod[], o: PodsOutputOptions, start: StartWatch): Promise<void> {
  const {runPodWatchApp} = await import('./watch/run.js')
  await runPodWatchApp(pods, {wide: o.output === 'wide', allNamespaces: o.allNamespaces, namespace: o.namespace}, start)
}

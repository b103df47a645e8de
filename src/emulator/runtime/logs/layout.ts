import type {CriLogLine, LogStream} from '../../provider/logs.js'
import {join} from 'node:path'

/**
 * Where container logs live: the kubelet's /var/log/pods layout under the
 * state dir, one file per container restart, so the kubelet API can serve
 * `previous` and the runtime can rotate:
 *   <stateDir>/logs/<namespace>_<pod>_<uid>/<container>/<restartCount>.log
 * Rotated files are <restartCount>.log.1 .. .N (older = higher N).
 * Each line is in the CRI format: `<RFC3339Nano> <stdout|stderr> <F|P> <text>`.
 */
/** Where the pods' log directories are: `<stateDir>/logs`. */
export function logsDir(stateDir: string): string {
  return join(stateDir, 'logs')
}

export function podLogDir(stateDir: string, namespace: string, podName: string, uid: string): string {
  return join(logsDir(stateDir), podLogDirName(namespace, podName, uid))
}

/** A file name may have at most this many bytes (NAME_MAX on Linux file systems). */
export const MaxFileNameBytes = 255

/**
 * `<namespace>_<pod>_<uid>`; a pod name too long for that to be a file name
 * (names may have 253 characters) is cut, the UID keeps it unique.
 */
export function podLogDirName(namespace: string, podName: string, uid: string): string {
  const room = MaxFileNameBytes - Buffer.byteLength(namespace) - Buffer.byteLength(uid) - 2
  return `${namespace}_${podName.length > room ? podName.slice(0, Math.max(0, room)) : podName}_${uid}`
}

export function containerLogDir(stateDir: string, namespace: string, podName: string, uid: string, container: string): string {
  return join(podLogDir(stateDir, namespace, podName, uid), container)
}

export function containerLogFile(stateDir: string, namespace: string, podName: string, uid: string, container: string, restartCount: number): string {
  return join(containerLogDir(stateDir, namespace, podName, uid, container), `${restartCount}.log`)
}

export type {CriLogLine, LogStream}

/** RFC3339 with nanoseconds, as the CRI writes it. */
export function criTimestamp(date: Date, nanosWithinMs = 0): string {
  const iso = date.toISOString() // 2026-01-02T03:04:05.678Z
  return `${iso.slice(0, 23)}${String(nanosWithinMs).padStart(6, '0')}Z`
}

export function formatCriLine(stream: LogStream, content: string, tag: 'F' | 'P' = 'F', time = new Date()): string {
  return `${criTimestamp(time)} ${stream} ${tag} ${content}\n`
}

export function parseCriLine(line: string): CriLogLine | undefined {
  const m = /^(\S+) (stdout|stderr) ([FP]) (.*)$/s.exec(line.replace(/\n$/, ''))
  if (!m) return undefined
  const time = new Date(m[1])
  if (Number.isNaN(time.getTime())) return undefined
  return {time, timestamp: m[1], stream: m[2] as LogStream, tag: m[3] as 'F' | 'P', content: m[4]}
}

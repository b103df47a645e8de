import {spawn, type ChildProcessWithoutNullStreams} from 'node:child_process'
import {Duplex} from 'node:stream'
import {DialError, type DialAttempt} from '../../provider/streaming.js'
import {hostProgram} from '../process/host-programs.js'

/**
 * Port-forward's dial into a pod with a network namespace of its own, as
 * containerd's PortForward makes it: inside the namespace, to localhost:port,
 * IPv4 then IPv6. A server that listens on the pod's loopback only is
 * reached, as on the kubelet. A thread cannot enter a namespace in Node.js,
 * so a small process does: nsenter joins the namespace and runs this Node.js
 * with the script below, whose stdin and stdout are the connection.
 */

/**
 * The helper: argv[1] the port, argv[2] the timeout. Its first stderr line is
 * `ok` once connected, or the failed attempts as `4 CODE 6 CODE`; then bytes
 * flow both ways until the pod's side ends (the helper then exits, which
 * ends the connection) or the caller destroys it (which kills the helper).
 */
const DialScript = `
const net = require('net')
const port = Number(process.argv[1]), timeout = Number(process.argv[2])
const failed = []
function attempt(family) {
  const s = net.connect({host: family === 4 ? '127.0.0.1' : '::1', port, allowHalfOpen: true, timeout})
  let up = false
  s.once('timeout', () => { if (!up) s.destroy(Object.assign(new Error('timeout'), {code: 'ETIMEDOUT'})) })
  s.once('error', (e) => {
    if (up) return process.exit(0)
    failed.push(family + ' ' + (e.code || 'EIO'))
    if (family === 4) return attempt(6)
    process.stderr.write(failed.join(' ') + '\\n', () => process.exit(1))
  })
  s.once('connect', () => {
    up = true
    s.setTimeout(0)
    s.setNoDelay(true)
    process.stderr.write('ok\\n')
    process.stdin.pipe(s)
    s.pipe(process.stdout, {end: false})
    // pipe() never ends process.stdout: the pod's side ending ends the connection, as containerd's copy returns then.
    s.once('end', () => process.stdout.write('', () => process.exit(0)))
    s.once('close', () => process.exit(0))
  })
}
attempt(4)
`

/** Parses the helper's first stderr line: undefined for `ok`, else the failed attempts (any other words, nsenter's own error, as the reason). */
export function dialAttempts(line: string): DialAttempt[] | undefined {
  const text = line.trim()
  if (text === 'ok') return undefined
  if (!/^[46] [A-Z0-9_]+( [46] [A-Z0-9_]+)*$/.test(text)) return [{family: 4, code: text || 'EIO'}]
  const words = text.split(' ')
  const attempts: DialAttempt[] = []
  for (let i = 0; i + 1 < words.length; i += 2) attempts.push({family: words[i] === '6' ? 6 : 4, code: words[i + 1]})
  return attempts
}

/**
 * The helper's stdin and stdout as one connection, whose end is the
 * helper's: destroying one stops the other. Its end (the helper's exit, a
 * destroy before the end) comes as an error (AbortError) on a Duplex.from:
 * handled here, so a connection nobody reads yet, destroyed because its
 * port-forward stream went first, never ends the node; its readers see it close.
 */
export function helperConnection(child: ChildProcessWithoutNullStreams): Duplex {
  const connection = Duplex.from({readable: child.stdout, writable: child.stdin})
  connection.on('error', () => undefined)
  connection.once('close', () => child.kill('SIGKILL'))
  child.once('exit', () => connection.destroy())
  return connection
}

/** Connects to localhost:port inside the network namespace at netnsPath; rejects with DialError when neither family answers. */
export function dialInNetns(netnsPath: string, port: number, timeoutMs: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const child = spawn(hostProgram('nsenter'), [`--net=${netnsPath}`, '--', process.execPath, '-e', DialScript, String(port), String(timeoutMs)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let first = ''
    let settled = false
    const settle = (error?: Error) => {
      if (settled) return
      settled = true
      if (error) {
        child.kill('SIGKILL')
        return reject(error)
      }
      resolve(helperConnection(child))
    }
    child.stderr.setEncoding('utf8')
    child.stderr.on('data', (chunk: string) => {
      if (settled) return
      first += chunk
      const nl = first.indexOf('\n')
      if (nl < 0) return
      const attempts = dialAttempts(first.slice(0, nl))
      settle(attempts ? new DialError(attempts) : undefined)
    })
    child.once('error', (e) => settle(new DialError([{family: 4, code: (e as NodeJS.ErrnoException).code ?? 'EIO'}])))
    child.once('exit', (code) => settle(new DialError(dialAttempts(first.split('\n')[0]) ?? [{family: 4, code: `exit ${code}`}])))
  })
}

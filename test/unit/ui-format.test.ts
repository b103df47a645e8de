import {describe, expect, test} from '@jest/globals'
import {mkdtempSync, appendFileSync, mkdirSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {parseDuration} from '../../src/cli/duration.js'
import {formatElapsed} from '../../src/kubectl/duration.js'
import {newExits} from '../../src/cli/kill-service.js'
import {kubectlErrorText} from '../../src/cli/session.js'
import {CriContainerLogs} from '../../src/emulator/runtime/logs/container-logs.js'
import {PodLogTail} from '../../src/ui/dashboard/log-tail.js'
import {killProgressLine} from '../../src/ui/kill-progress.js'
import {LogLinePrinter} from '../../src/ui/log-lines.js'
import {noResourcesMessage} from '../../src/ui/pods-output.js'
import {kubeletEndpointText, podPids, podsTable, PodWatchPrinter} from '../../src/kubectl/pods-printer.js'
import {containerLogFile, formatCriLine} from '../../src/emulator/runtime/logs/layout.js'
import {pod} from './fixtures/fake-feed.js'
import {PodNetworkAnnotation} from '../../src/common/labels.js'

describe('durations', () => {
  test('Go durations and bare seconds', () => {
    expect(parseDuration('--timeout', '30s')).toBe(30_000)
    expect(parseDuration('--timeout', '1m30s')).toBe(90_000)
    expect(parseDuration('--timeout', '500ms')).toBe(500)
    expect(parseDuration('--since', '2h')).toBe(7_200_000)
    expect(parseDuration('--request-timeout', '5', {bareSeconds: true})).toBe(5000)
    expect(parseDuration('--request-timeout', '0', {bareSeconds: true})).toBe(0)
    expect(() => parseDuration('--timeout', '5')).toThrow('invalid --timeout "5": expected a duration such as 30s')
    expect(() => parseDuration('--timeout', '5x')).toThrow('invalid --timeout')
    expect(() => parseDuration('--timeout', '')).toThrow('invalid --timeout')
    expect(formatElapsed(850)).toBe('850ms')
    expect(formatElapsed(2400)).toBe('2.4s')
    expect(formatElapsed(65_000)).toBe('1m05s')
  })
})

describe('pods printer', () => {
  test("kubectl's tabwriter layout, NAMESPACE with -A, IP, PIDS, SANDBOX, WALLS, NETWORK and ENDPOINT with -o wide; PIDs absent show <none>", () => {
    const a = pod('web', {namespace: 'shop', phase: 'Running'})
    a.metadata!.annotations = {'vnode.dev/pids': 'web=4242,side=4243', 'vnode.dev/sandbox': 'namespaces', 'vnode.dev/walls': 'mount,pid,users', [PodNetworkAnnotation]: 'pod', 'vnode.dev/relay': ''}
    a.status!.podIP = '10.0.0.7'
    const b = pod('db-with-a-long-name', {namespace: 'shop'})
    const c = pod('api', {namespace: 'shop', phase: 'Running'})
    c.metadata!.annotations = {'vnode.dev/relay': 'vnode-system/vnode-relay-dev-laptop'}
    const lines = podsTable([a, b, c], {wide: true, allNamespaces: true})
    expect(lines[0]).toBe('NAMESPACE   NAME                  READY   STATUS              RESTARTS   AGE   NODE         IP         PIDS        SANDBOX      WALLS             NETWORK   ENDPOINT')
    expect(lines[1]).toBe('shop        web                   1/1     Running             0          60s   dev-laptop   10.0.0.7   4242,4243   namespaces   mount,pid,users   pod       direct')
    expect(lines[2]).toBe('shop        db-with-a-long-name   0/1     ContainerCreating   0          60s   dev-laptop   <none>     <none>      <none>       <none>            <none>    <none>')
    expect(lines[3]).toBe(
      'shop        api                   1/1     Running             0          60s   dev-laptop   <none>     <none>      <none>       <none>            <none>    relay vnode-system/vnode-relay-dev-laptop',
    )
    expect(podsTable([a], {wide: false, allNamespaces: false})[0]).toBe('NAME   READY   STATUS    RESTARTS   AGE   NODE')
    expect(podPids(b)).toBe('<none>')
    expect(kubeletEndpointText(undefined, '192.0.2.2:10250')).toBe('direct at 192.0.2.2:10250')
    expect(kubeletEndpointText('vnode-system/vnode-relay-x', '10.244.1.7:10250')).toBe('relay vnode-system/vnode-relay-x at 10.244.1.7:10250')
    expect(noResourcesMessage(false, 'shop')).toBe('No resources found in shop namespace.')
    expect(noResourcesMessage(true, 'x')).toBe('No resources found')
  })

  test('watch rows keep the widths of the first table (appended, like kubectl get -w)', () => {
    const p = new PodWatchPrinter(false, false)
    const first = p.initial([pod('a', {phase: 'Running'})])
    expect(first[0]).toBe('NAME   READY   STATUS    RESTARTS   AGE   NODE')
    const row = p.row(pod('a', {phase: 'Running', deleting: true}))
    expect(row).toBe('a      1/1     Terminating   0          60s   dev-laptop') // wider than its column: still three spaces
  })
})

describe('kubectl-style errors', () => {
  const s = {server: 'https://127.0.0.1:6443', requestTimeoutMs: 5000}
  test('API statuses, refused connections, timeouts', () => {
    expect(kubectlErrorText({code: 404, body: JSON.stringify({kind: 'Status', reason: 'NotFound', message: 'pods "x" not found'})}, s)).toBe('Error from server (NotFound): pods "x" not found')
    expect(kubectlErrorText({code: 500, body: {message: 'Get "https://n:10250/containerLogs": dial tcp: connection refused'}}, s)).toBe(
      'Error from server: Get "https://n:10250/containerLogs": dial tcp: connection refused',
    )
    expect(kubectlErrorText(Object.assign(new Error('request to https://127.0.0.1:6443/api failed, reason: connect ECONNREFUSED'), {name: 'FetchError', code: 'ECONNREFUSED'}), s)).toBe(
      'The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?',
    )
    expect(kubectlErrorText(Object.assign(new Error('aborted'), {name: 'AbortError'}), s)).toBe('Unable to connect to the server 127.0.0.1:6443: no answer within 5.0s (--request-timeout)')
  })
})

describe('kill progress', () => {
  const opts = {color: false, describe: () => 'Error from server (Forbidden): no'}
  const target = {namespace: 'ns', name: 'web'}
  test('lines per step, failures on stderr in kubectl words', () => {
    expect(killProgressLine({kind: 'not-found', target}, opts)).toEqual({stream: 'err', text: 'error: pods "web" not found'})
    expect(killProgressLine({kind: 'failed', target, error: {}}, opts)).toEqual({stream: 'err', text: 'Error from server (Forbidden): no'})
    expect(killProgressLine({kind: 'requested', target, uid: 'u', gracePeriodSeconds: 30, removed: false, elapsedMs: 12}, opts)!.text).toBe('[  12ms] pod/web deletion requested (grace period 30s)')
    expect(killProgressLine({kind: 'container', target, container: 'app', exitCode: 143, reason: 'Error', elapsedMs: 1500}, opts)!.text).toBe(
      '[  1.5s] pod/web container app exited: exit code 143 (Error)',
    )
    expect(killProgressLine({kind: 'removed', target, elapsedMs: 2000}, opts)!.text).toBe('[  2.0s] pod/web removed: pod "web" deleted')
    expect(killProgressLine({kind: 'timeout', target, elapsedMs: 3000}, opts)).toEqual({stream: 'err', text: 'error: timed out waiting for pod/web to be removed (gave up after 3.0s)'})
  })

  test('container exits are reported once each', () => {
    const before = pod('web', {phase: 'Running'})
    const after = pod('web', {phase: 'Running'})
    after.status!.containerStatuses![0].state = {terminated: {exitCode: 0, reason: 'Completed', finishedAt: new Date(1000)}}
    expect(newExits(before, after)).toEqual([{container: 'web', exitCode: 0, reason: 'Completed', signal: undefined}])
    expect(newExits(after, after)).toEqual([])
  })
})

describe('log lines', () => {
  test('one container: as is; several: a name column, a colour each', () => {
    const p = new LogLinePrinter(false, ['app', 'sidecar'])
    expect(p.format('app', 'hello', false)).toBe('hello')
    expect(p.format('app', 'hello', true)).toBe('app     │ hello')
    const c = new LogLinePrinter(true, ['app', 'sidecar'])
    const a = c.format('app', 'x', true)
    const b = c.format('sidecar', 'x', true)
    expect(a).toContain('\u001b[')
    expect(a.slice(0, 5)).not.toBe(b.slice(0, 5)) // different colours
  })

  test('the log pane follows the container logs: appended lines only, partial records joined, a restart starts the new file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-logtail-'))
    const p = pod('web', {phase: 'Running', containers: ['app']})
    const tail = new PodLogTail(new CriContainerLogs(dir, () => p, 10), 3)
    // Lines arrive from the follow between polls: wait for them (a loaded machine may take a while),
    // and give a poll that must see nothing the time a follow needs.
    const settle = () => new Promise((r) => setTimeout(r, 100))
    const arrived = async (): Promise<boolean> => {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await settle()) if (tail.poll(p)) return true
      return false
    }
    try {
      const file0 = containerLogFile(dir, 'default', 'web', p.metadata!.uid!, 'app', 0)
      mkdirSync(dirname(file0), {recursive: true})
      expect(tail.poll(p)).toBe(false)
      appendFileSync(file0, formatCriLine('stdout', 'one') + formatCriLine('stderr', 'tw', 'P') + formatCriLine('stderr', 'o'))
      expect(await arrived()).toBe(true)
      expect(tail.lines).toEqual([
        {container: 'app', stream: 'stdout', text: 'one'},
        {container: 'app', stream: 'stderr', text: 'two'},
      ])
      appendFileSync(file0, formatCriLine('stdout', 'three').slice(0, 10)) // half a record
      await settle()
      expect(tail.poll(p)).toBe(false)
      appendFileSync(file0, formatCriLine('stdout', 'three').slice(10))
      expect(await arrived()).toBe(true)
      p.status!.containerStatuses![0].restartCount = 1
      const file1 = containerLogFile(dir, 'default', 'web', p.metadata!.uid!, 'app', 1)
      appendFileSync(file1, formatCriLine('stdout', 'after restart'))
      expect(await arrived()).toBe(true)
      expect(tail.lines.map((l) => l.text)).toEqual(['two', 'three', 'after restart']) // bounded to 3
    } finally {
      tail.close()
      rmSync(dir, {recursive: true, force: true})
    }
  })
})

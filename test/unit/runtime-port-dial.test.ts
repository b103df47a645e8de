import {expect, test} from '@jest/globals'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {dialAttempts, helperConnection} from '../../src/emulator/runtime/network/port-dial.js'

// The port-forward helper's first stderr line: `ok`, or each family's failed attempt.
test("the dial helper's verdict: ok, or the failed attempts per family in order", () => {
  expect(dialAttempts('ok')).toBeUndefined()
  expect(dialAttempts('ok\n')).toBeUndefined()
  expect(dialAttempts('4 ECONNREFUSED 6 EADDRNOTAVAIL')).toEqual([
    {family: 4, code: 'ECONNREFUSED'},
    {family: 6, code: 'EADDRNOTAVAIL'},
  ])
  expect(dialAttempts('4 ETIMEDOUT')).toEqual([{family: 4, code: 'ETIMEDOUT'}])
  // A helper that died before saying anything (nsenter refused the namespace) is still a failed dial.
  expect(dialAttempts('')).toEqual([{family: 4, code: 'EIO'}])
  expect(dialAttempts("nsenter: reassociate to namespace 'ns/net' failed: Invalid argument")).toEqual([{family: 4, code: "nsenter: reassociate to namespace 'ns/net' failed: Invalid argument"}])
})

// A port-forward stream that went while its dial was under way: the dial's connection is destroyed before anyone
// listens to it. Its AbortError once ended the whole node (an unhandled 'error' event); it must only close.
test("a helper's connection destroyed before anyone reads it closes and stops the helper, with no uncaught error", async () => {
  const child = spawn(process.execPath, ['-e', 'process.stdin.pipe(process.stdout)'], {stdio: ['pipe', 'pipe', 'pipe']})
  const uncaught: Error[] = []
  const onUncaught = (e: Error) => void uncaught.push(e)
  process.prependListener('uncaughtException', onUncaught)
  try {
    const conn = helperConnection(child)
    const exited = once(child, 'exit')
    conn.destroy()
    // (events.once would reject on the AbortError the connection handles itself: only its close is awaited.)
    await new Promise((r) => conn.once('close', r))
    const [code, signal] = await exited
    expect(code === null ? signal : code).toBe('SIGKILL')
    await new Promise((r) => setImmediate(r))
    expect(uncaught).toEqual([])
  } finally {
    process.off('uncaughtException', onUncaught)
  }
})

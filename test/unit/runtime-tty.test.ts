import {describe, expect, test} from '@jest/globals'
import {spawn} from 'node:child_process'
import {ControllingTerminalPrefix, openTerminal} from '../../src/emulator/runtime/container/tty.js'

describe('a terminal opened for a program started elsewhere (the sandbox)', () => {
  test('the program has it as its controlling terminal, sees resizes; its output ends when it exits', async () => {
    const t = await openTerminal()
    t.resize(100, 30)
    const [cmd, ...pre] = ControllingTerminalPrefix
    const child = spawn(cmd, [...pre, 'sh', '-c', 'tty; stty size; read x; stty size; ps -o tty= -p $$; exit 5'], {stdio: [t.slaveFd, t.slaveFd, t.slaveFd], env: {PATH: process.env.PATH ?? ''}})
    await new Promise((r) => child.once('spawn', r))
    t.closeSlave()
    let out = ''
    t.output.on('data', (d: Buffer) => (out += d.toString()))
    const ended = new Promise((r) => t.output.once('end', r))
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    const until = async (re: RegExp) => {
      for (let i = 0; i < 100 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 50))
    }
    await until(/30 100/)
    t.resize(120, 40)
    t.input.write('go\n')
    expect(await exit).toBe(5)
    await ended
    expect(out).toMatch(/\/dev\/pts\/\d+\r\n30 100\r\n/)
    expect(out).toContain('40 120\r\n')
    expect(out).toMatch(/pts\/\d+\r\n/)
  })
})

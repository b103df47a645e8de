import {expect} from '@jest/globals'
import {execa} from 'execa'
import {existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {join} from 'node:path'
import {runDir, testEnv, uniqueName, waitFor} from './helpers.js'

/**
 * `kubectl exec -it` of a shell into a running pod, on a real terminal
 * (tmux): `tty` names a /dev/pts of the sandbox, job control works, and
 * `exit 3` is kubectl's exit code with its "command terminated" line.
 */
export async function expectInteractiveShell(kubectl: string, ns: string, pod: string): Promise<void> {
  const sock = uniqueName('tmux')
  const dir = mkdtempSync(join(runDir(), 'tty-'))
  const tmux = (...args: string[]) => execa('tmux', ['-L', sock, ...args], {env: testEnv()})
  const screen = async () => (await tmux('capture-pane', '-p', '-t', 's')).stdout
  try {
    await tmux('new-session', '-d', '-s', 's', '-x', '100', '-y', '30', `${kubectl} -n ${ns} exec -it ${pod} -- sh 2> ${dir}/err; echo rc=$? > ${dir}/rc; sleep 30`)
    await waitFor(async () => /[$#] ?$/m.test(await screen()), 'a shell prompt', 20_000)
    await tmux('send-keys', '-t', 's', 'tty; sleep 0.3 & jobs; fg; echo mark-$((6*7))', 'Enter')
    const first = await waitFor(async () => ((await screen()).includes('mark-42') ? screen() : undefined), 'the answers', 15_000)
    expect(first).toMatch(/^\/dev\/pts\/\d+$/m)
    expect(first).toContain('Running')
    expect(first).not.toContain('Cannot set tty process group')
    expect(first).not.toContain('not a tty')
    await tmux('send-keys', '-t', 's', 'exit 3', 'Enter')
    const rc = await waitFor(() => existsSync(join(dir, 'rc')) && readFileSync(join(dir, 'rc'), 'utf8').trim(), 'kubectl to exit', 15_000)
    expect(rc).toBe('rc=3')
    expect(readFileSync(join(dir, 'err'), 'utf8')).toContain('command terminated with exit code 3')
  } finally {
    await tmux('kill-server').catch(() => undefined)
    rmSync(dir, {recursive: true, force: true})
  }
}

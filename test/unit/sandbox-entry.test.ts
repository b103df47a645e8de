import {describe, expect, test} from '@jest/globals'
import {parseEnvZero} from '../support/env-output.js'
import {spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {EntryScript, EntrySyscalls, PerlQuietLocale, sandboxEntry} from '../../src/emulator/runtime/sandbox/entry.js'
import {parseMountinfo, readMountinfo, type MountEntry} from '../../src/emulator/runtime/sandbox/mountinfo.js'
import {prepareRootLayer, removeRootLayer, retiredLayersRemoved, type RootLayer} from '../../src/emulator/runtime/sandbox/root-layer.js'
import type {ContainerSandboxSpec} from '../../src/emulator/runtime/sandbox/spec.js'

/** A mount table of these points alone, every filesystem writable. */
function writableMounts(...points: string[]): MountEntry[] {
  return points.map((point) => ({point, fsType: '', source: '', readOnlyFs: false}))
}

const layer: RootLayer = {
  dir: '/state/pods/u/layers/c',
  overlays: [],
  subMounts: [],
  maskedMounts: [],
  topMounts: [],
  mounts: [{options: 'lowerdir=/,upperdir=/state/pods/u/layers/c/upper,workdir=/state/pods/u/layers/c/work', target: '/state/pods/u/layers/c/merged'}],
  mode: 'root',
  root: '/state/pods/u/layers/c/merged',
}
const sandbox = (over: Partial<ContainerSandboxSpec> = {}): ContainerSandboxSpec =>
  ({binds: [], hide: [], rootLayer: layer, netns: '/run/netns/pool-1', mountBase: '/proc/42/ns/mnt', ...over}) as ContainerSandboxSpec
const bwrap = ['/usr/bin/bwrap', '--bind', '/x', '/', '--', '/bin/true']

describe('the sandbox entry', () => {
  test('as root with one overlay: one program (perl, the fixed script) with the call numbers of the architecture, then bwrap', () => {
    const e = sandboxEntry(sandbox(), {A: '1'}, bwrap, 'x64')
    expect(e.argv).toEqual([
      expect.stringMatching(/^\/.*\/perl$/),
      '-e',
      EntryScript,
      '308',
      '272',
      '165',
      '/run/netns/pool-1',
      '/proc/42/ns/mnt',
      layer.mounts[0]!.options,
      layer.mounts[0]!.target,
      '--',
      ...bwrap,
    ])
    // perl is kept quiet about a locale the host lacks; the script takes the variable out again.
    expect(e.env).toEqual({A: '1', [PerlQuietLocale]: '0'})
    expect(sandboxEntry(sandbox(), {}, bwrap, 'arm64').argv.slice(3, 6)).toEqual(['268', '97', '40'])
    // Without a pod network or a mount base, the script is told '' and joins nothing.
    expect(sandboxEntry(sandbox({netns: undefined, mountBase: undefined}), {}, bwrap, 'x64').argv.slice(6, 8)).toEqual(['', ''])
  })

  test('the four programs elsewhere: another architecture, a perl variable in the environment, several overlays, the unprivileged layer, no layer', () => {
    const old = (s: ContainerSandboxSpec, env: Record<string, string> = {}, arch: NodeJS.Architecture = 'x64') => sandboxEntry(s, env, bwrap, arch)
    const chain = old(sandbox(), {}, 's390x')
    expect(chain.argv.slice(0, 4)).toEqual([expect.stringMatching(/nsenter$/), '--net=/run/netns/pool-1', '--mount=/proc/42/ns/mnt', '--'])
    expect(chain.argv).toEqual(expect.arrayContaining([expect.stringMatching(/unshare$/), expect.stringMatching(/\/sh$/), expect.stringMatching(/\/mount$/)]))
    expect(chain.argv.slice(-bwrap.length)).toEqual(bwrap)
    expect(chain.env).toEqual({})
    // PERL5OPT would run as root before the sandbox: the container's environment goes to the programs unchanged.
    const perlEnv = {PERL5OPT: '-Mwarnings', A: '1'}
    expect(old(sandbox(), perlEnv).argv[0]).toMatch(/nsenter$/)
    expect(old(sandbox(), perlEnv).env).toBe(perlEnv)
    const two = {...layer, mounts: [...layer.mounts, {options: 'lowerdir=/tmp,upperdir=/u2,workdir=/w2', target: '/m2'}], fstab: '/state/fstab'}
    expect(old(sandbox({rootLayer: two})).argv).toContain('/state/fstab')
    expect(old(sandbox({rootLayer: {...layer, mode: 'user-namespace'}})).argv).toContain('--user')
    expect(old(sandbox({rootLayer: undefined})).argv).toEqual([expect.stringMatching(/nsenter$/), '--net=/run/netns/pool-1', '--mount=/proc/42/ns/mnt', '--', ...bwrap])
    expect(old(sandbox({rootLayer: undefined, netns: undefined, mountBase: undefined})).argv).toEqual(bwrap)
  })

  const root = process.getuid?.() === 0
  // As root (CI runs as root: there it runs, and fails if it cannot).
  ;(root || process.env.CI === 'true' ? test : test.skip)(
    'run as root: the overlay is mounted in a namespace of its own, the command gets the environment as given, errors keep their exit status',
    async () => {
      const base = mkdtempSync(join(tmpdir(), 'entry-'))
      const dir = join(base, 'layer')
      try {
        const made = await prepareRootLayer(dir, 'root', ['/usr'], writableMounts('/', '/proc'))
        expect(made.mounts).toHaveLength(1)
        const own = {netns: '/proc/self/ns/net', mountBase: '/proc/self/ns/mnt', rootLayer: made}
        const run = (then: string[], env: Record<string, string>, over: Partial<ContainerSandboxSpec> = {}) => {
          const e = sandboxEntry(sandbox({...own, ...over}), env, then)
          if (EntrySyscalls[process.arch]) expect(e.argv[0]).toMatch(/perl$/)
          return spawnSync(e.argv[0]!, e.argv.slice(1), {env: e.env, encoding: 'utf8'})
        }
        // A name Kubernetes allows and a shell would drop, a locale the host lacks: passed on as given, and no word from perl.
        const env = {'a.b': 'dot', LANG: 'xx_YY.UTF-8', PATH: '/usr/bin:/bin'}
        const shown = run(['/usr/bin/env', '-0'], env)
        expect(shown.stderr).toBe('')
        expect(shown.status).toBe(0)
        expect(parseEnvZero(shown.stdout)).toEqual(env)
        // The overlay of / is there for the command, in its namespace only.
        const listed = run(['/bin/ls', join(made.root!, 'usr')], env)
        expect(listed.status).toBe(0)
        expect(listed.stdout.split('\n')).toContain('bin')
        const writes = run(['/bin/sh', '-c', `echo x > ${join(made.root!, 'usr', 'vnode-entry-test')}`], env)
        expect(writes.status).toBe(0)
        expect(spawnSync('/bin/ls', [join(dir, 'upper', 'usr')], {encoding: 'utf8'}).stdout).toContain('vnode-entry-test')
        expect(parseMountinfo(readMountinfo()).map((m) => m.point)).not.toContain(made.root)
        // A mount that fails: 125, as the shell step's; a namespace file that is not there: 1, as nsenter's.
        writeFileSync(join(base, 'file'), '')
        const badMount = run(['/bin/true'], env, {rootLayer: {...made, mounts: [{options: made.mounts[0]!.options, target: join(base, 'missing')}]}})
        expect(badMount.status).toBe(125)
        expect(badMount.stderr).toMatch(/missing/)
        const badNet = run(['/bin/true'], env, {netns: join(base, 'no-such-netns')})
        expect(badNet.status).toBe(1)
        expect(badNet.stderr).toMatch(/no-such-netns/)
        const badCommand = run([join(base, 'no-such-program')], env)
        expect(badCommand.status).toBe(127)
      } finally {
        removeRootLayer(dir)
        await retiredLayersRemoved()
        rmSync(base, {recursive: true, force: true})
      }
    },
  )
})

import {afterEach, describe, expect, test} from '@jest/globals'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {execa} from 'execa'
import {FileWatcher, gitIgnored} from '../../src/cli/dev/file-watch.js'
import {DefaultIgnores, globRegExp, matchesAny, watchRoot} from '../../src/cli/dev/globs.js'
import {tempDir} from './temp-dirs.js'

describe('globs', () => {
  const matches = (glob: string, path: string) => globRegExp(glob).test(path)

  test('without a slash: any one segment at any depth', () => {
    expect(matches('*.pyc', 'a/b/c.pyc')).toBe(true)
    expect(matches('node_modules', 'node_modules/x/y.js')).toBe(true)
    expect(matches('node_modules', 'src/node_modules/x.js')).toBe(true)
    expect(matches('*.py', 'a.pyc')).toBe(false)
    expect(matches('.#*', 'src/.#server.py')).toBe(true)
  })

  test('with a slash: the path from the current directory; ** crosses segments, * does not', () => {
    expect(matches('src/*.py', 'src/a.py')).toBe(true)
    expect(matches('src/*.py', 'src/sub/a.py')).toBe(false)
    expect(matches('src/**/*.py', 'src/sub/deep/a.py')).toBe(true)
    expect(matches('src/**/*.py', 'src/a.py')).toBe(true)
    expect(matches('./build/', 'build/out.js')).toBe(true)
    expect(matches('src/**', 'src/x')).toBe(true)
    expect(matches('src/a?.py', 'src/ab.py')).toBe(true)
    expect(matches('src/a.py', 'srcXa.py')).toBe(false)
  })

  test('the default ignores: VCS, dependencies, caches, editor files', () => {
    const ignores = DefaultIgnores.map(globRegExp)
    for (const p of ['.git/index', 'node_modules/a/b.js', 'pkg/__pycache__/m.cpython-311.pyc', 'server.py.swp', 'server.py~', '4913']) expect(matchesAny(p, ignores)).toBe(true)
    for (const p of ['server.py', 'src/app.ts', 'gitignore.md']) expect(matchesAny(p, ignores)).toBe(false)
  })

  test('a --watch-path: a directory is itself, a glob its fixed part and a filter, a file its directory and itself', () => {
    const dirs = new Set(['/w', '/w/src', '/w/lib'])
    const isDir = (p: string) => dirs.has(p)
    expect(watchRoot('/w', 'src', isDir)).toEqual({dir: '/w/src'})
    const glob = watchRoot('/w', 'src/**/*.py', isDir)
    expect(glob.dir).toBe('/w/src')
    expect(glob.only!.test('src/a/b.py')).toBe(true)
    expect(glob.only!.test('src/a/b.js')).toBe(false)
    const file = watchRoot('/w', 'lib/config.yaml', isDir)
    expect(file.dir).toBe('/w/lib')
    expect(file.only!.test('lib/config.yaml')).toBe(true)
    expect(file.only!.test('lib/other.yaml')).toBe(false)
    expect(watchRoot('/w', '*.py', isDir).dir).toBe('/w')
  })
})

describe('FileWatcher', () => {
  const open: FileWatcher[] = []
  afterEach(() => {
    for (const w of open.splice(0)) w.close()
  })

  function watcher(dir: string, gitIgnored = async () => new Set<string>()) {
    const batches: string[][] = []
    const w = new FileWatcher({cwd: dir, roots: [{dir}], ignore: DefaultIgnores.map(globRegExp), debounceMs: 150, onChange: (p) => batches.push(p), gitIgnored})
    open.push(w)
    return {w, batches}
  }

  const until = async (what: string, f: () => boolean, ms = 5_000) => {
    const end = Date.now() + ms
    while (!f()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  test('changes close together are one batch; ignored directories are not even watched', async () => {
    const dir = tempDir('vnode-dev-watch-')
    mkdirSync(join(dir, 'node_modules', 'dep'), {recursive: true})
    mkdirSync(join(dir, 'src'))
    const {w, batches} = watcher(dir)
    await w.start()
    expect(w.size).toBe(2)
    writeFileSync(join(dir, 'server.py'), 'a')
    writeFileSync(join(dir, 'src', 'util.py'), 'b')
    writeFileSync(join(dir, 'node_modules', 'dep', 'x.js'), 'c')
    writeFileSync(join(dir, 'server.py.swp'), 'd')
    await until('a batch', () => batches.length > 0)
    await new Promise((r) => setTimeout(r, 300))
    expect(batches).toEqual([['server.py', 'src/util.py']])
  })

  test("a directory made later is watched; what the repository's ignore files exclude is dropped", async () => {
    const dir = tempDir('vnode-dev-watch-')
    const {w, batches} = watcher(dir, async () => new Set(['build/out.txt']))
    await w.start()
    mkdirSync(join(dir, 'pkg'))
    await until('the new directory watched', () => w.size === 2)
    writeFileSync(join(dir, 'pkg', 'mod.py'), 'x')
    await until('a batch with pkg/mod.py', () => batches.flat().includes('pkg/mod.py'))
    const before = batches.length
    mkdirSync(join(dir, 'build'))
    await until('build watched', () => w.size === 3)
    await new Promise((r) => setTimeout(r, 300))
    const after = batches.length
    writeFileSync(join(dir, 'build', 'out.txt'), 'x')
    writeFileSync(join(dir, 'build', 'keep.txt'), 'x')
    await until('a batch with build/keep.txt', () => batches.slice(after).flat().includes('build/keep.txt'))
    expect(batches.slice(after).flat()).not.toContain('build/out.txt')
    expect(before).toBeGreaterThan(0)
  })
})

describe("the repository's ignore files", () => {
  test('git check-ignore says which changed paths a .gitignore excludes; outside a repository none are', async () => {
    const repo = tempDir('vnode-dev-git-')
    await execa('git', ['init', '-q'], {cwd: repo})
    writeFileSync(join(repo, '.gitignore'), 'build/\n*.log\n')
    expect(await gitIgnored(repo, ['build/out.js', 'server.py', 'logs/x.log', 'src/a.py'])).toEqual(new Set(['build/out.js', 'logs/x.log']))
    expect(await gitIgnored(repo, ['server.py'])).toEqual(new Set())
    expect(await gitIgnored(tempDir('vnode-dev-nogit-'), ['build/out.js'])).toEqual(new Set())
  })
})

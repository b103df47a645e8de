import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {chownSync, chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, runDir, stopAllVnodes, testWhen} from './helpers.js'

/**
 * `up --hide` and `--expose` through the CLI (docs/SECURITY.md, "Hidden
 * paths"): a path given to --hide is out of sight in every container, a
 * default credential location named by --expose is seen after all, the
 * other defaults stay hidden, and what neither names is seen as on the host.
 * The node's HOME is a directory of this test, so the defaults under `~` are
 * the test's own files.
 */
describeE2e('up --hide and --expose', () => {
  const f = new KubectlFixture('hide')
  const base = join(runDir(), `hide-${f.ns}`)
  const home = join(base, 'home')
  const paths = {
    exposed: join(home, '.docker', 'config.json'),
    hiddenDefault: join(home, '.aws', 'credentials'),
    hiddenAsked: join(base, 'project-secrets', 'token'),
    visible: join(base, 'project', 'README'),
  }
  const content = (which: keyof typeof paths) => `${which}-${f.ns}`
  /** Hidden with --hide too: a file, and a directory inside a directory of its own attributes. */
  const attrs = join(base, 'attrs')
  const inner = join(attrs, 'inner')
  const secretFile = join(base, 'secret-file')

  beforeAll(async () => {
    for (const [which, p] of Object.entries(paths) as [keyof typeof paths, string][]) {
      mkdirSync(join(p, '..'), {recursive: true})
      writeFileSync(p, content(which))
    }
    mkdirSync(inner, {recursive: true})
    writeFileSync(join(inner, 'key'), 'inner-key')
    chownSync(attrs, 1234, 2345)
    chmodSync(attrs, 0o750)
    writeFileSync(secretFile, 'secret-file')
    await f.setUp(['--sandbox', 'namespaces', '--hide', join(base, 'project-secrets'), '--hide', inner, '--hide', secretFile, '--expose', '~/.docker'], {HOME: home})
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
    rmSync(base, {recursive: true, force: true})
  })

  test('a --hide path is unreadable, an --expose default is readable, the other defaults stay hidden: main process and kubectl exec', async () => {
    const out = f.out('seen')
    const script = Object.entries(paths)
      .map(([which, p]) => `cat ${p} > ${out}/${which} 2>&1`)
      .join('; ')
    await f.create({
      metadata: {name: 'seen'},
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', `mkdir -p ${out}; ${script}; echo done > ${out}/done; while :; do sleep 1; done`]}],
      },
    })
    await f.file('seen/done')
    const seen = (which: keyof typeof paths) => readFileSync(join(out, which), 'utf8')
    expect(seen('exposed')).toBe(content('exposed'))
    expect(seen('visible')).toBe(content('visible'))
    expect(seen('hiddenDefault')).not.toContain(content('hiddenDefault'))
    expect(seen('hiddenAsked')).not.toContain(content('hiddenAsked'))

    for (const which of Object.keys(paths) as (keyof typeof paths)[]) {
      const r = await kubectl(['-n', f.ns, 'exec', 'seen', '--', 'cat', paths[which]])
      const readable = which === 'exposed' || which === 'visible'
      expect({which, exitCode: r.exitCode === 0 ? 0 : 'failed', stdout: r.stdout}).toEqual({which, exitCode: readable ? 0 : 'failed', stdout: readable ? content(which) : ''})
    }
  })

  // As root with a writable layer, the hidden paths on the root filesystem are a layer of the container's overlay
  // (sandbox/hidden-layer.ts), not a mount each: the same empty directories and files, nothing of them in mountinfo.
  testWhen(process.getuid?.() === 0, 'the writable layer is root-only')(
    'hidden paths on the root filesystem show empty through the layer, with no mount at them, their directories as on the host, writes kept in the container',
    async () => {
      const hostPoints = readFileSync('/proc/self/mountinfo', 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ')[4]!)
      const deepest = hostPoints.filter((m) => m === '/' || base === m || base.startsWith(`${m}/`)).sort((a, b) => b.length - a.length)[0]
      if (deepest !== '/') throw new Error(`the test's dir ${base} is on the mount at ${deepest}, not on the root filesystem the layer covers`)
      const hiddenDir = join(base, 'project-secrets')
      const out = f.out('layer')
      const view = [
        `ls -A ${hiddenDir} | wc -l`,
        `[ -d ${hiddenDir} ] && echo dir`,
        `wc -c < ${secretFile}`,
        `stat -c '%a %u %g' ${attrs}`,
        `ls -A ${inner} | wc -l`,
        `echo mine > ${hiddenDir}/written && cat ${hiddenDir}/written`,
      ]
      await f.create({
        metadata: {name: 'layer'},
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'main',
              image: 'sh',
              command: [
                '/bin/sh',
                '-c',
                `mkdir -p ${out}; { ${view.join('; ')}; } > ${out}/view 2>&1; awk '{print $5}' /proc/self/mountinfo > ${out}/points; echo done > ${out}/done; while :; do sleep 1; done`,
              ],
            },
          ],
        },
      })
      await f.file('layer/done')
      expect(readFileSync(join(out, 'view'), 'utf8')).toBe('0\ndir\n0\n750 1234 2345\n0\nmine\n')
      const points = readFileSync(join(out, 'points'), 'utf8').split('\n').filter(Boolean)
      expect(points.filter((p) => p === base || p.startsWith(`${base}/`) || p === home || p.startsWith(`${home}/`))).toEqual([])
      // The host's files are untouched, and the layer's tmpfs is not in the host's mount table.
      expect(existsSync(join(hiddenDir, 'written'))).toBe(false)
      expect(readFileSync(join(hiddenDir, 'token'), 'utf8')).toBe(content('hiddenAsked'))
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain('hidden-layer')
      const exec = await kubectl(['-n', f.ns, 'exec', 'layer', '--', 'ls', '-A', inner])
      expect({exitCode: exec.exitCode, stdout: exec.stdout}).toEqual({exitCode: 0, stdout: ''})
    },
  )
})

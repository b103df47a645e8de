import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {KubectlFixture} from './kubectl-fixture.js'
import {describeE2e, kubectl, runDir, stopAllVnodes} from './helpers.js'

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

  beforeAll(async () => {
    for (const [which, p] of Object.entries(paths) as [keyof typeof paths, string][]) {
      mkdirSync(join(p, '..'), {recursive: true})
      writeFileSync(p, content(which))
    }
    await f.setUp(['--sandbox', 'namespaces', '--hide', join(base, 'project-secrets'), '--expose', '~/.docker'], {HOME: home})
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
})

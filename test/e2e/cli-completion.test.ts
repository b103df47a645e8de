import {expect, test} from '@jest/globals'
import {describeE2e, kubectl, nodeWithNamespace} from './helpers.js'

/** kubectl's hidden completion command, as the shell scripts of `kubectl completion bash|zsh` call it. */
async function completions(words: string[]): Promise<{values: string[]; directive: string}> {
  const r = await kubectl(['__complete', 'vnode', ...words])
  expect(r.exitCode).toBe(0)
  const lines = r.stdout.split('\n').filter(Boolean)
  return {values: lines.slice(0, -1).map((l) => l.split('\t')[0]), directive: lines.at(-1)!}
}

/**
 * `kubectl vnode <TAB>` through the real kubectl, which runs
 * kubectl_complete-vnode from PATH (beside kubectl-vnode): commands, flags,
 * flag values, and the names of the pods on vnode nodes.
 */
describeE2e('shell completion through kubectl', () => {
  const f = nodeWithNamespace('comp')
  const {ns, node} = f

  test('commands, a topic, flags and their values', async () => {
    expect(await completions([''])).toEqual({values: ['admission-policy', 'cluster', 'dev', 'doctor', 'kill', 'logs', 'pods', 'up'], directive: ':4'})
    expect((await completions(['cluster', ''])).values).toEqual(['build', 'down', 'status', 'up'])
    expect((await completions(['up', '--sand'])).values).toEqual(['--sandbox', '--sandbox-pool'])
    expect((await completions(['up', '--sandbox-p'])).values).toEqual(['--sandbox-pool'])
    expect(await completions(['up', '--sandbox', ''])).toEqual({values: ['auto', 'namespaces', 'none'], directive: ':4'})
    expect((await completions(['up', '--output=j'])).values).toEqual(['--output=json'])
  })

  test('kill and logs complete the names of the pods on vnode nodes, in the namespace given', async () => {
    for (const name of ['web-0', 'web-1', 'db-0']) {
      await f.c.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {name},
          spec: {nodeName: node, automountServiceAccountToken: false, containers: [{name: 'c', image: 'node', command: [process.execPath, '-e', 'setInterval(() => {}, 1000)']}]},
        },
      })
    }
    expect(await completions(['kill', '-n', ns, 'web'])).toEqual({values: ['web-0', 'web-1'], directive: ':4'})
    expect((await completions(['logs', '--namespace', ns, ''])).values).toEqual(['db-0', 'web-0', 'web-1'])
    expect((await completions(['kill', '-n', ns.slice(0, -2)])).values).toContain(ns)
  })
})

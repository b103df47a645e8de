import {describe, expect, test} from '@jest/globals'
import {CompDirective, type CompletionCommand, type CompletionSources, complete, formatCompletion} from '../../src/cli/completion.js'

const commands: CompletionCommand[] = [
  {
    path: ['up'],
    summary: 'Register a node\nmore text',
    takesPods: false,
    flags: {
      name: {type: 'option', summary: 'node name'},
      sandbox: {type: 'option', options: ['auto', 'namespaces', 'none']},
      'state-dir': {type: 'option'},
      kubeconfig: {type: 'option'},
      context: {type: 'option'},
      tui: {type: 'boolean', allowNo: true},
      secret: {type: 'boolean', hidden: true},
    },
  },
  {path: ['kill'], summary: 'Terminate pods', takesPods: true, flags: {namespace: {type: 'option', char: 'n'}, force: {type: 'boolean'}, kubeconfig: {type: 'option'}}},
  {path: ['cluster', 'up'], summary: 'Start a control plane', takesPods: false, flags: {dir: {type: 'option'}}},
  {path: ['cluster', 'down'], summary: 'Stop it', takesPods: false, flags: {}},
]

/** Sources that record what they were asked with. */
function sources() {
  const asked: Record<string, string>[] = []
  const s: CompletionSources = {
    pods: async (v) => (asked.push(v), ['web-0', 'web-1', 'db-0']),
    contexts: async () => ['kind', 'local'],
    namespaces: async () => ['default', 'shop'],
  }
  return {s, asked}
}

const run = (args: string[], s = sources().s) => complete(commands, args, s, new Map([['cluster', 'Run a control plane']]))

describe('completion of kubectl vnode (kubectl_complete-vnode)', () => {
  test('commands and topics, each with its summary first line; a topic lists its own', async () => {
    expect(await run([''])).toEqual({candidates: ['up\tRegister a node', 'kill\tTerminate pods', 'cluster\tRun a control plane'], directive: CompDirective.NoFileComp})
    expect((await run(['k'])).candidates).toEqual(['kill\tTerminate pods'])
    expect((await run(['cluster', ''])).candidates).toEqual(['up\tStart a control plane', 'down\tStop it'])
  })

  test('flags of the command, --no- forms, hidden ones left out', async () => {
    expect((await run(['up', '--'])).candidates.map((c) => c.split('\t')[0])).toEqual(['--context', '--kubeconfig', '--name', '--sandbox', '--state-dir', '--tui', '--no-tui'])
    expect((await run(['up', '--s'])).candidates.map((c) => c.split('\t')[0])).toEqual(['--sandbox', '--state-dir'])
  })

  test("a flag's values: its options, in both forms; paths left to the shell; contexts from the kubeconfig", async () => {
    expect(await run(['up', '--sandbox', 'n'])).toEqual({candidates: ['namespaces', 'none'], directive: CompDirective.NoFileComp})
    expect((await run(['up', '--sandbox=a'])).candidates).toEqual(['--sandbox=auto'])
    expect(await run(['up', '--state-dir', ''])).toEqual({candidates: [], directive: CompDirective.Default})
    expect(await run(['up', '--name', ''])).toEqual({candidates: [], directive: CompDirective.NoFileComp})
    expect((await run(['up', '--context', ''])).candidates).toEqual(['kind', 'local'])
  })

  test('pod names for kill, from the namespace and kubeconfig given so far; a flag value is not a pod', async () => {
    const {s, asked} = sources()
    expect((await run(['kill', '-n', 'shop', '--kubeconfig', '/k', 'web'], s)).candidates).toEqual(['web-0', 'web-1'])
    expect(asked).toEqual([{namespace: 'shop', kubeconfig: '/k'}])
    expect((await run(['kill', '-n', ''], s)).candidates).toEqual(['default', 'shop'])
    expect((await run(['up', ''], s)).candidates).toEqual([])
  })

  test('a source that fails completes nothing; the output ends with the directive line', async () => {
    const failing: CompletionSources = {pods: () => Promise.reject(new Error('connection refused')), contexts: async () => [], namespaces: async () => []}
    expect(await run(['kill', ''], failing)).toEqual({candidates: [], directive: CompDirective.NoFileComp})
    expect(formatCompletion({candidates: ['a', 'b\tB'], directive: 4})).toBe('a\nb\tB\n:4\n')
  })
})

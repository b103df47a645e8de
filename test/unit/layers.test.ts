import {describe, expect, test} from '@jest/globals'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {Doors, importCycles, layerViolations} from '../../scripts/check-layers.mjs'

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'vnode-layers-'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), {recursive: true})
    writeFileSync(join(root, path), text)
  }
  return root
}

describe('layering check', () => {
  test('names each import that crosses a forbidden boundary, static, dynamic or type-only', () => {
    const root = tree({
      'src/emulator/runtime/a.ts': "import {x} from '../pods/b.js'\n",
      'src/emulator/pods/b.ts': "export const x = 1\nconst r = await import('../runtime/a.js')\n",
      'src/ui/c.ts': "import type {K} from '../emulator/kube/client.js'\nimport {y} from '../cli/d.js'\n",
      'src/cli/d.ts': "export {z} from '../ui/c.js'\n",
      'src/emulator/node/e.ts': "import '../../ui/c.js'\nimport {p} from '../../cluster/ports.js'\n",
    })
    try {
      const lines: string[] = layerViolations(root)
      expect(lines.map((l) => l.split(':')[0]).sort()).toEqual([
        'src/cli/d.ts imports src/ui/c',
        'src/emulator/node/e.ts imports src/cluster/ports',
        'src/emulator/node/e.ts imports src/ui/c',
        'src/emulator/pods/b.ts imports src/emulator/runtime/a',
        'src/emulator/pods/b.ts imports src/emulator/runtime/a',
        'src/emulator/runtime/a.ts imports src/emulator/pods/b',
        'src/ui/c.ts imports src/cli/d',
        'src/ui/c.ts imports src/emulator/kube/client',
      ])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test('allows imports inside a layer and downwards', () => {
    const root = tree({
      'src/emulator/runtime/a.ts': "import {q} from '../quantity.js'\nimport {c} from '../../common/ports.js'\nimport {s} from './s.js'\n",
      'src/ui/c.ts': "import {podStatus} from '../kubectl/pod-status.js'\nimport type {F} from '../emulator/emulator.js'\n",
      'src/common/ports.ts': "import {createServer} from 'node:net'\nimport {x} from './other.js'\n",
    })
    try {
      expect(layerViolations(root)).toEqual([])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test('the server, the provider contract, the emulator, the ui, the cli and printing never reach into the runtime, the node or the pod workers', () => {
    const root = tree({
      'src/emulator/server/routes/logs.ts': "import {LogFormatter} from '../../runtime/logs/reader.js'\n",
      'src/emulator/runtime/pod/p.ts': "import {NodeMarkerLabel} from '../../node/node-status.js'\nimport {isUid} from '../../server/validate.js'\n",
      'src/emulator/provider/logs.ts': "import type {CriLogLine} from '../runtime/logs/layout.js'\n",
      'src/emulator/emulator.ts': "import {CriContainerLogs} from './runtime/logs/container-logs.js'\n",
      'src/ui/store.ts': "import {podRequests} from '../emulator/pods/admission.js'\n",
      'src/cli/pods.ts': "import {PodPidsAnnotation} from '../emulator/node/node-status.js'\n",
      'src/kubectl/watch.ts': "export type {WatchEventType} from '../emulator/kube/watch-loop.js'\n",
    })
    try {
      expect(layerViolations(root).map((l) => l.split(':')[0].replace(/ imports .*/, ''))).toEqual(
        expect.arrayContaining([
          'src/emulator/server/routes/logs.ts',
          'src/emulator/runtime/pod/p.ts',
          'src/emulator/provider/logs.ts',
          'src/emulator/emulator.ts',
          'src/ui/store.ts',
          'src/cli/pods.ts',
          'src/kubectl/watch.ts',
        ]),
      )
      expect(layerViolations(root).filter((l) => l.startsWith('src/emulator/runtime/pod/p.ts'))).toHaveLength(2)
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test('no file of the emulator outside the runtime imports it; kube/ imports no other folder of the emulator; the relay knows no pods', () => {
    const root = tree({
      'src/emulator/emulator-kubelet.ts': "import {ProcessProvider} from './runtime/process-provider.js'\n",
      'src/emulator/node/host.ts': "import type {CgroupSupport} from '../runtime/host.js'\n",
      'src/emulator/relay/endpoint.ts':
        "import {detectPodNetwork} from '../runtime/host.js'\nimport {PodWorker} from '../pods/pod-worker.js'\nimport type {PodLifecycleHandler} from '../provider/handler.js'\n",
      'src/emulator/kube/events.ts': "import {NodeMarkerLabel} from '../node/node-status.js'\nconst s = await import('../server/server.js')\n",
      'src/emulator/runtime/pod/p.ts': "import {EventReason} from '../../kube/event-reasons.js'\nimport {q} from '../../quantity.js'\nimport {x} from './q.js'\n",
      'src/emulator/relay/tunnels.ts':
        "import {sleep} from '../kube/backoff.js'\nimport type {KubeletServer} from '../server/server.js'\nimport type {NodeController} from '../node/node-controller.js'\n",
      'src/emulator/kube/client.ts': "import {UserError} from '../../errors.js'\nimport {x} from './backoff.js'\n",
    })
    try {
      expect(
        layerViolations(root)
          .map((l) => l.split(':')[0])
          .sort(),
      ).toEqual([
        'src/emulator/emulator-kubelet.ts imports src/emulator/runtime/process-provider',
        'src/emulator/kube/events.ts imports src/emulator/node/node-status',
        'src/emulator/kube/events.ts imports src/emulator/server/server',
        'src/emulator/node/host.ts imports src/emulator/runtime/host',
        'src/emulator/relay/endpoint.ts imports src/emulator/pods/pod-worker',
        'src/emulator/relay/endpoint.ts imports src/emulator/provider/handler',
        'src/emulator/relay/endpoint.ts imports src/emulator/runtime/host',
      ])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test("the runtime README's door table is check-layers' list", () => {
    const readme = readFileSync(join(dirname(new URL(import.meta.url).pathname), '..', '..', 'src', 'emulator', 'runtime', 'README.md'), 'utf8')
    const table = readme.slice(readme.indexOf('| folder | door files |'))
    const rows = [...table.split('\n\n')[0].matchAll(/^\| (\w+)\/ \| ([\w, -]+) \|$/gm)].map((m) => [`src/emulator/runtime/${m[1]}/`, m[2].split(', ')])
    const doors = (Doors as {folder: string; doors: string[]}[]).filter((d) => d.folder !== 'src/emulator/runtime/').map((d) => [d.folder, d.doors])
    expect(rows).toEqual(doors)
  })

  test('the runtime is entered only through its doors, and each of its folders only through its door files', () => {
    const root = tree({
      'src/commands/up.ts':
        "import {detectSandbox} from '../emulator/runtime/sandbox/detect.js'\nimport {ProcessProvider} from '../emulator/runtime/process-provider.js'\nimport {detectCgroups} from '../emulator/runtime/host.js'\n",
      'src/emulator/runtime/pod/p.ts': "import {planContainerLogs} from '../logs/plan.js'\nimport {readCriRecords} from '../logs/reader.js'\nimport {x} from './q.js'\n",
      'src/emulator/runtime/host.ts': "export {detectCgroups} from './cgroups/detect.js'\nexport {CgroupV1} from './cgroups/v1.js'\n",
    })
    try {
      expect(layerViolations(root).map((l) => l.split(':')[0])).toEqual([
        'src/commands/up.ts imports src/emulator/runtime/sandbox/detect',
        'src/emulator/runtime/host.ts imports src/emulator/runtime/cgroups/v1',
        'src/emulator/runtime/pod/p.ts imports src/emulator/runtime/logs/plan',
      ])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test('names each import cycle once, type-only and dynamic imports included', () => {
    const root = tree({
      'src/emulator/runtime/container/exec.ts': "import {ContainerProcess} from '../process/container-process.js'\nexport const resolve = 1\n",
      'src/emulator/runtime/process/container-process.ts': "import {spawnSandboxed} from '../sandbox/spawn.js'\n",
      'src/emulator/runtime/sandbox/spawn.ts': "import {resolve} from '../container/exec.js'\n",
      'src/ui/a.ts': "const b = await import('./b.js')\n",
      'src/ui/b.ts': "import type {A} from './a.js'\n",
      'src/ui/c.ts': "import {a} from './a.js'\n",
    })
    try {
      expect(importCycles(root)).toEqual([
        'src/emulator/runtime/container/exec -> src/emulator/runtime/process/container-process -> src/emulator/runtime/sandbox/spawn -> src/emulator/runtime/container/exec',
        'src/ui/a -> src/ui/b -> src/ui/a',
      ])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  test('the tree as it is has no import cycle', () => {
    expect(importCycles(join(dirname(new URL(import.meta.url).pathname), '..', '..'))).toEqual([])
  })

  test('the tree as it is keeps the rules', () => {
    expect(layerViolations(join(dirname(new URL(import.meta.url).pathname), '..', '..'))).toEqual([])
  })
})

import {describe, expect, test} from '@jest/globals'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {layerViolations} from '../../scripts/check-layers.mjs'

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

  test('the tree as it is keeps the rules', () => {
    expect(layerViolations(join(dirname(new URL(import.meta.url).pathname), '..', '..'))).toEqual([])
  })
})

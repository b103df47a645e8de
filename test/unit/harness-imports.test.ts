import {describe, expect, test} from '@jest/globals'
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join} from 'node:path'

// The conformance harness and the benchmark are plain .mjs scripts that import the
// built modules (`dist(...)`) at run time, so neither the typecheck nor the linter sees
// them: a moved export surfaces only minutes into a CI run. Check each import here.
const Root = join(dirname(new URL(import.meta.url).pathname), '..', '..')
const ScriptDirs = ['test/conformance', 'bench', 'scripts']
// `const {a, b: c} = await dist('x.js')`, `... = await import(join(root, 'dist/x.js'))`, `import {a} from '../dist/x.js'`
const DistImports = [
  /const\s*\{([^}]*)\}\s*=\s*await\s+dist\(\s*'([^']+)'\s*\)/g,
  /const\s*\{([^}]*)\}\s*=\s*await\s+import\(\s*join\([^,]+,\s*'dist\/([^']+)'\s*\)\s*\)/g,
  /import\s*\{([^}]*)\}\s*from\s*'(?:\.\.\/)+dist\/([^']+)'/g,
]

interface DistImport {
  script: string
  module: string
  names: string[]
}

function distImports(): DistImport[] {
  const found: DistImport[] = []
  for (const dir of ScriptDirs) {
    for (const file of readdirSync(join(Root, dir)).filter((f) => f.endsWith('.mjs'))) {
      const text = readFileSync(join(Root, dir, file), 'utf8')
      for (const m of DistImports.flatMap((re) => [...text.matchAll(re)])) {
        const names = m[1]
          .split(',')
          .map((n) => n.split(/:| as /)[0].trim())
          .filter(Boolean)
        found.push({script: `${dir}/${file}`, module: m[2], names})
      }
    }
  }
  return found
}

describe('the harness scripts import what the sources export', () => {
  const imports = distImports()

  test('the scan finds the harness imports (a changed pattern would check nothing)', () => {
    expect(imports.map((i) => i.script)).toEqual(expect.arrayContaining(['test/conformance/reference-node.mjs', 'test/conformance/run.mjs', 'bench/leftovers.mjs', 'bench/floor.mjs']))
  })

  test.each(imports.map((i) => [`${i.script}: ${i.module}`, i] as const))('%s', async (_label, i) => {
    const source = join(Root, 'src', i.module.replace(/\.js$/, '.ts'))
    const mod = (await import(source)) as Record<string, unknown>
    const missing = i.names.filter((n) => !(n in mod))
    expect(missing).toEqual([])
  })
})

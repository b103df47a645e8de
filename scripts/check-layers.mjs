#!/usr/bin/env node
// The import rules between the folders of src/ (DESIGN.md's layers), checked
// on every `npm test`: a relative import, static or dynamic, type-only or not,
// that crosses a forbidden boundary is printed and fails the run.
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join, normalize, relative, sep} from 'node:path'
import {fileURLToPath} from 'node:url'

/** Folder prefixes (relative to the repository) and the folders they never import. */
export const LayerRules = [
  {from: 'src/emulator/runtime/', never: ['src/emulator/pods/'], why: 'the runtime runs what the pod workers decide, and knows nothing of them'},
  {from: 'src/emulator/pods/', never: ['src/emulator/runtime/'], why: 'the pod workers reach the runtime through the provider interface only'},
  {from: 'src/emulator/', never: ['src/ui/', 'src/cli/', 'src/commands/', 'src/kubectl/', 'src/cluster/'], why: 'the node knows nothing of terminals, commands or the dev control plane'},
  {from: 'src/ui/', never: ['src/emulator/kube/', 'src/cli/', 'src/commands/'], why: 'the ui renders what it is fed and never calls the API server'},
  {from: 'src/cli/', never: ['src/ui/', 'src/commands/'], why: "services return data; rendering is the ui's"},
  {from: 'src/kubectl/', never: ['src/ui/', 'src/cli/', 'src/commands/'], why: 'kubectl-style printing is shared by the cli and the ui'},
  {from: 'src/common/', never: ['src/'], why: 'common helpers are leaves any layer may use'},
]

const ImportPattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm

/** Every relative import in a file's text, as repository paths (extension dropped). */
export function relativeImports(file, text) {
  const out = []
  for (const m of text.matchAll(ImportPattern)) out.push(normalize(join(dirname(file), m[1])).replace(/\.(js|ts|tsx|mjs)$/, ''))
  return out
}

/** A forbidden import, or undefined: `file` and `target` are repository paths with '/' separators. */
export function brokenRule(file, target) {
  for (const rule of LayerRules) {
    if (!file.startsWith(rule.from)) continue
    const hit = rule.never.find((n) => target.startsWith(n) && !(target.startsWith(rule.from) && rule.from.startsWith(n)))
    if (hit) return {rule, hit}
  }
  return undefined
}

function sourceFiles(root, dir) {
  return readdirSync(join(root, dir), {recursive: true, withFileTypes: true})
    .filter((e) => e.isFile() && /\.(ts|tsx|mjs)$/.test(e.name))
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'))
}

/** The violations below root/src, one line each. */
export function layerViolations(root) {
  const lines = []
  for (const file of sourceFiles(root, 'src')) {
    for (const target of relativeImports(file, readFileSync(join(root, file), 'utf8'))) {
      const broken = brokenRule(file, target.split(sep).join('/'))
      if (broken) lines.push(`${file} imports ${target}: ${broken.rule.from} never imports ${broken.hit} (${broken.rule.why})`)
    }
  }
  return lines
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const violations = layerViolations(join(dirname(fileURLToPath(import.meta.url)), '..'))
  for (const v of violations) process.stderr.write(`error: ${v}\n`)
  process.exit(violations.length ? 1 : 0)
}

#!/usr/bin/env node
// The import rules between the folders of src/ (DESIGN.md's layers; the
// runtime's in src/emulator/runtime/README.md), checked by `npm run lint`: a
// relative import, static or dynamic, type-only or not, that crosses a
// forbidden boundary or enters a folder other than through its doors, and
// every import cycle, is printed and fails the run.
import {readdirSync, readFileSync} from 'node:fs'
import {dirname, join, normalize, relative, sep} from 'node:path'
import {fileURLToPath} from 'node:url'

/** Folder prefixes (relative to the repository), the folders they never import, and the prefixes a rule leaves out (`except`). */
export const LayerRules = [
  {from: 'src/emulator/runtime/', never: ['src/emulator/pods/'], why: 'the runtime runs what the pod workers decide, and knows nothing of them'},
  {from: 'src/emulator/runtime/', never: ['src/emulator/node/'], why: "the node's status is the node controller's; the runtime reports through the provider"},
  {from: 'src/emulator/runtime/', never: ['src/emulator/server/'], why: 'the kubelet API serves the runtime through the provider, never the other way'},
  {from: 'src/emulator/pods/', never: ['src/emulator/runtime/'], why: 'the pod workers reach the runtime through the provider interface only'},
  {from: 'src/emulator/server/', never: ['src/emulator/runtime/'], why: 'the kubelet API gets logs and streams only through the provider'},
  {
    from: 'src/emulator/provider/',
    never: ['src/emulator/runtime/', 'src/emulator/pods/', 'src/emulator/node/', 'src/emulator/server/'],
    why: 'the provider contract knows no implementation and no user of it',
  },
  {
    from: 'src/emulator/',
    except: ['src/emulator/runtime/'],
    never: ['src/emulator/runtime/'],
    why: 'the node reaches the runtime through the provider it is given (commands/up.ts builds the runtime)',
  },
  {
    from: 'src/emulator/kube/',
    never: ['src/emulator/node/', 'src/emulator/pods/', 'src/emulator/provider/', 'src/emulator/relay/', 'src/emulator/runtime/', 'src/emulator/server/'],
    why: "kube/ is the emulator's leaf: its client, watches, events and object manager serve every other folder and use none",
  },
  {
    from: 'src/emulator/relay/',
    never: ['src/emulator/pods/', 'src/emulator/provider/'],
    why: "the relay carries connections to the node's kubelet API and knows nothing of pods or of what runs them",
  },
  {from: 'src/emulator/', never: ['src/ui/', 'src/cli/', 'src/commands/', 'src/kubectl/', 'src/cluster/'], why: 'the node knows nothing of terminals, commands or the dev control plane'},
  {
    from: 'src/ui/',
    never: ['src/emulator/kube/', 'src/emulator/node/', 'src/emulator/pods/', 'src/emulator/runtime/', 'src/emulator/server/', 'src/cli/', 'src/commands/'],
    why: "the ui renders what it is fed (the emulator's feed, the provider's types) and never calls the API server",
  },
  {from: 'src/cli/', never: ['src/ui/', 'src/commands/'], why: "services return data; rendering is the ui's"},
  {
    from: 'src/cli/',
    never: ['src/emulator/node/', 'src/emulator/pods/', 'src/emulator/runtime/', 'src/emulator/server/'],
    why: 'services act through the API (kube/) as kubectl would, or run a node through emulator.ts',
  },
  {from: 'src/kubectl/', never: ['src/ui/', 'src/cli/', 'src/commands/'], why: 'kubectl-style printing is shared by the cli and the ui'},
  {
    from: 'src/kubectl/',
    never: ['src/emulator/kube/', 'src/emulator/node/', 'src/emulator/pods/', 'src/emulator/runtime/', 'src/emulator/server/'],
    why: 'printing renders objects it is given and watches nothing',
  },
  {from: 'src/common/', never: ['src/'], why: 'common helpers are leaves any layer may use'},
]

/**
 * Folders entered only through their door files: an import from outside the
 * folder must name one of them (paths without extension). The runtime as a
 * whole has two doors; inside it, each folder names the files the others use.
 */
export const Doors = [
  {folder: 'src/emulator/runtime/', doors: ['process-provider', 'host'], why: 'the runtime is entered through the provider (process-provider.ts) and, for `up`, host.ts'},
  ...Object.entries({
    cgroups: ['detect', 'node-cgroups', 'pod-cgroup', 'usage'],
    container: ['attach', 'config', 'crash-loop', 'exec', 'exit', 'host', 'probing', 'security-context', 'start', 'state', 'stop', 'stop-deadline', 'tty'],
    env: ['env', 'expansion', 'references'],
    images: ['default-images', 'image-map', 'image-program'],
    logs: ['container-logs', 'layout', 'reader', 'writer'],
    network: ['detect', 'node-network', 'pod-attachment', 'pod-network', 'port-conflict', 'port-dial'],
    pod: ['adoption', 'pod-runtime', 'record', 'sync-clock', 'usage'],
    probes: ['effects', 'handlers', 'worker'],
    process: ['command-errors', 'container-process', 'executable', 'helper-runner', 'host-programs', 'instance-io', 'proc', 'process-spec', 'usage'],
    sandbox: ['container-view', 'detect', 'mount-base', 'pod-files', 'pod-pid-namespace', 'pod-sandbox', 'security-context', 'spawn', 'spec', 'walls', 'walls-fs'],
    volumes: ['refresh', 'tokens', 'volumes'],
  }).map(([room, doors]) => ({folder: `src/emulator/runtime/${room}/`, doors, why: `the other rooms of the runtime use ${room}/ through its door files`})),
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
    if (!(rule.from.endsWith('/') ? file.startsWith(rule.from) : file.replace(/\.(ts|tsx|mjs)$/, '') === rule.from.replace(/\.ts$/, ''))) continue
    if (rule.except?.some((e) => file.startsWith(e))) continue
    const hit = rule.never.find((n) => target.startsWith(n) && !(target.startsWith(rule.from) && rule.from.startsWith(n)))
    if (hit) return {rule, hit}
  }
  return undefined
}

/** An import that enters a folder other than through its doors, or undefined. */
export function brokenDoor(file, target) {
  for (const d of Doors) {
    if (!target.startsWith(d.folder) || file.startsWith(d.folder)) continue
    const rest = target.slice(d.folder.length)
    if (!d.doors.includes(rest)) return d
  }
  return undefined
}

function sourceFiles(root, dir) {
  return readdirSync(join(root, dir), {recursive: true, withFileTypes: true})
    .filter((e) => e.isFile() && /\.(ts|tsx|mjs)$/.test(e.name))
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'))
}

/** Every relative import of every source file below root/src: file -> targets (repository paths, no extension). */
function importGraph(root) {
  const graph = new Map()
  for (const file of sourceFiles(root, 'src'))
    graph.set(
      file,
      relativeImports(file, readFileSync(join(root, file), 'utf8')).map((t) => t.split(sep).join('/')),
    )
  return graph
}

/** The violations below root/src, one line each. */
export function layerViolations(root) {
  const lines = []
  for (const [file, targets] of importGraph(root)) {
    for (const target of targets) {
      const broken = brokenRule(file, target)
      if (broken) lines.push(`${file} imports ${target}: ${broken.rule.from} never imports ${broken.hit} (${broken.rule.why})`)
      const door = brokenDoor(file, target)
      if (door) lines.push(`${file} imports ${target}: ${door.folder} is entered only through ${door.doors.join(', ')} (${door.why})`)
    }
  }
  return lines
}

/** Each import cycle below root/src once, as the files around it (`a -> b -> a`); type-only imports count too. */
export function importCycles(root) {
  const graph = new Map([...importGraph(root)].map(([file, targets]) => [file.replace(/\.(ts|tsx|mjs)$/, ''), targets]))
  const state = new Map()
  const stack = []
  const cycles = []
  const seen = new Set()
  const visit = (node) => {
    state.set(node, 'open')
    stack.push(node)
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue
      if (state.get(next) === 'open') {
        const cycle = stack.slice(stack.indexOf(next))
        const key = [...cycle].sort().join(' ')
        if (!seen.has(key)) {
          seen.add(key)
          cycles.push([...cycle, next].join(' -> '))
        }
      } else if (!state.has(next)) visit(next)
    }
    stack.pop()
    state.set(node, 'done')
  }
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node)
  return cycles
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..')
  const violations = [...layerViolations(root), ...importCycles(root).map((c) => `import cycle: ${c}`)]
  for (const v of violations) process.stderr.write(`error: ${v}\n`)
  process.exit(violations.length ? 1 : 0)
}

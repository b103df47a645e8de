import {loadYaml, type V1Container} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {readFile} from 'node:fs/promises'
import {isAbsolute} from 'node:path'
import {invalidInput} from '../../provider/errdefs.js'

/**
 * The image map (`--images FILE`): a process node has no images, so an image
 * name says what to run only through this file. Format:
 *
 *   images:
 *     "node:*":                       # `*` matches anything (including / and :)
 *       command: [node]               # the image's ENTRYPOINT
 *       args: [server.js]             # its CMD (used when the container has no args)
 *       env: {NODE_ENV: development}  # below everything the pod spec sets
 *       workingDir: /srv/app          # when the container sets none
 *       user: "1000:1000"              # its USER: uid[:gid] or a name (default: vnode's user)
 *     "*":                            # the fallback
 *       command: [/usr/bin/env]
 *
 * Exact names win over globs, globs are tried in file order, `*` last. A
 * pattern without a tag also matches the name with any tag or digest.
 */
export interface ImageEntry {
  command?: string[]
  args?: string[]
  env?: Record<string, string>
  workingDir?: string
  /** The user the program runs as without runAsUser, as an image's USER: "uid[:gid]" or a name in /etc/passwd (default: vnode's own user). */
  user?: string
  /**
   * Built-in entries only: files the program needs (a server's config),
   * written under the container's image directory before each start;
   * `$(VNODE_IMAGE_DIR)` in command and args is that directory.
   */
  files?: (container: V1Container) => Record<string, string>
}

/** In an image map entry's command and args: the container's image directory (built-in entries' files). */
export const ImageDirVar = 'VNODE_IMAGE_DIR'

export interface ImageRule {
  pattern: string
  entry: ImageEntry
}

export class ImageMap {
  constructor(
    readonly rules: ImageRule[] = [],
    readonly source?: string,
    /** Consulted when no rule of this map matches: the built-in map (default-images.ts). */
    readonly fallback?: ImageMap,
    /** vnode's own map, not a user's file. */
    readonly builtIn = false,
  ) {}

  /** This map over another: its rules first (its `*` too), then the other's. */
  over(fallback: ImageMap): ImageMap {
    return new ImageMap(this.rules, this.source, fallback, this.builtIn)
  }

  static async load(path: string): Promise<ImageMap> {
    let text: string
    try {
      text = await readFile(path, 'utf8')
    } catch (error) {
      throw invalidInput(`cannot read image map ${path}: ${(error as Error).message}`)
    }
    return ImageMap.parse(text, path)
  }

  static parse(text: string, source = 'image map'): ImageMap {
    let doc: unknown
    try {
      doc = loadYaml(text)
    } catch (error) {
      throw invalidInput(`${source}: not valid YAML: ${(error as Error).message.split('\n')[0]}`)
    }
    if (doc === null || doc === undefined) return new ImageMap([], source)
    const images = (doc as {images?: unknown}).images
    if (typeof doc !== 'object' || Array.isArray(doc) || typeof images !== 'object' || images === null || Array.isArray(images)) {
      throw invalidInput(`${source}: expected a mapping with an "images" key: images: {"<image or glob>": {command: [...]}}`)
    }
    const rules = Object.entries(images as Record<string, unknown>).map(([pattern, raw]) => ({pattern, entry: parseEntry(raw, `${source}: image "${pattern}"`)}))
    return new ImageMap(rules, source)
  }

  /** The rule for an image: exact names first, then globs in file order, then `*`; then the fallback's. */
  resolve(image: string): ImageRule | undefined {
    const candidates = imageCandidates(image)
    const exact = this.rules.find((r) => !r.pattern.includes('*') && candidates.includes(r.pattern))
    if (exact) return exact
    const glob = this.rules.find((r) => r.pattern !== '*' && r.pattern.includes('*') && candidates.some((c) => globRegExp(r.pattern).test(c)))
    return glob ?? this.rules.find((r) => r.pattern === '*') ?? this.fallback?.resolve(image)
  }

  /** The map (this one or a fallback) a rule belongs to. */
  ownerOf(rule: ImageRule): ImageMap | undefined {
    return this.rules.includes(rule) ? this : this.fallback?.ownerOf(rule)
  }
}

function parseEntry(raw: unknown, where: string): ImageEntry {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw invalidInput(`${where}: expected a mapping with command, args, env, workingDir`)
  const r = raw as Record<string, unknown>
  for (const k of Object.keys(r))
    if (!['command', 'args', 'env', 'workingDir', 'user'].includes(k)) throw invalidInput(`${where}: unknown field "${k}" (allowed: command, args, env, workingDir, user)`)
  const entry: ImageEntry = {}
  if (r.command !== undefined) {
    entry.command = stringList(r.command, `${where}: command`)
    if (entry.command.length === 0) throw invalidInput(`${where}: command must not be empty`)
  }
  if (r.args !== undefined) entry.args = stringList(r.args, `${where}: args`)
  if (r.env !== undefined) {
    if (r.env === null || typeof r.env !== 'object' || Array.isArray(r.env)) throw invalidInput(`${where}: env must be a mapping of NAME: value`)
    entry.env = Object.fromEntries(Object.entries(r.env as Record<string, unknown>).map(([k, v]) => [k, scalar(v, `${where}: env ${k}`)]))
  }
  if (r.workingDir !== undefined) {
    if (typeof r.workingDir !== 'string' || !isAbsolute(r.workingDir)) throw invalidInput(`${where}: workingDir must be an absolute path`)
    entry.workingDir = r.workingDir
  }
  if (r.user !== undefined) {
    const user = scalar(r.user, `${where}: user`)
    if (!/^[^:\s]+(:[^:\s]+)?$/.test(user)) throw invalidInput(`${where}: user must be uid[:gid] or name[:group]`)
    entry.user = user
  }
  return entry
}

function stringList(v: unknown, where: string): string[] {
  if (typeof v === 'string') return [v]
  if (!Array.isArray(v)) throw invalidInput(`${where}: expected a list of strings`)
  return v.map((x, i) => scalar(x, `${where}[${i}]`))
}

function scalar(v: unknown, where: string): string {
  if (typeof v === 'string') return v
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  throw invalidInput(`${where}: expected a string`)
}

/**
 * The image as written, and without its digest and tag, so "nginx" matches
 * "nginx:1.25"; Docker Hub's official images also by their short name, so
 * "nginx" matches "docker.io/library/nginx:1.25".
 */
export function imageCandidates(image: string): string[] {
  const noDigest = image.split('@')[0]
  const lastSlash = noDigest.lastIndexOf('/')
  const colon = noDigest.lastIndexOf(':')
  const noTag = colon > lastSlash ? noDigest.slice(0, colon) : noDigest
  const hub = /^(?:(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)\/)?library\/(.+)$|^(?:docker\.io|index\.docker\.io)\/(.+)$/
  const short = [noDigest, noTag].map((n) => {
    const m = hub.exec(n)
    return m ? (m[1] ?? m[2]) : n
  })
  return [...new Set([image, noDigest, noTag, ...short])]
}

export function globRegExp(pattern: string): RegExp {
  return new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  )
}

export interface ResolvedProgram {
  /** Before $(VAR) expansion. */
  argv: string[]
  env: Record<string, string>
  workingDir?: string
  /** Identifies what the image resolved to, as an image digest would. */
  imageID: string
  /** The program came from an image map entry's command: where it is not installed, the start fails with CreateContainerError. */
  mapped?: {pattern: string; builtIn: boolean; source?: string}
  /** Files to write under the container's image directory (built-in server images). */
  files?: Record<string, string>
}

export type ProgramResult = {ok: true; program: ResolvedProgram} | {ok: false; message: string}

/**
 * What a container runs, with the container runtimes' rules: the container's
 * command replaces the image's ENTRYPOINT, its args replace the image's CMD.
 * Nothing is guessed: no command and no mapping is an error that says how to fix it.
 */
export function resolveProgram(container: V1Container, images: ImageMap): ProgramResult {
  const image = container.image ?? ''
  const rule = image ? images.resolve(image) : undefined
  const entry = rule?.entry ?? {}
  let argv: string[]
  let mapped: ResolvedProgram['mapped']
  const owner = rule ? images.ownerOf(rule) : undefined
  const builtIn = owner?.builtIn === true
  if (container.command && container.command.length > 0) {
    argv = [...container.command, ...(container.args ?? [])]
  } else if (entry.command) {
    argv = [...entry.command, ...(container.args ?? entry.args ?? [])]
    mapped = {pattern: rule!.pattern, builtIn, ...(owner?.source ? {source: owner.source} : {})}
  } else if (rule && (container.args?.length || entry.args?.length)) {
    // An image without an ENTRYPOINT: its CMD (or the container's args, which replace it) is the whole command.
    argv = [...(container.args?.length ? container.args : entry.args!)]
  } else {
    const where = images.source ? `the image map ${images.source}` : 'the image map (no --images file was given)'
    const why = rule ? `its image map entry "${rule.pattern}" has no command` : `image "${image}" matches no entry in ${where}`
    return {
      ok: false,
      message:
        `container "${container.name}" has no command and ${why}: set command (and args) in the container spec, ` +
        `or map the image to a program with \`kubectl vnode up --images FILE\`, e.g. images: {"${suggestPattern(image)}": {command: ["/path/to/program"]}}`,
    }
  }
  const imageID = `vnode://sha256:${createHash('sha256')
    .update(JSON.stringify({image, rule: rule?.pattern, builtIn, entry}))
    .digest('hex')}`
  const files = !container.command?.length && entry.files ? entry.files(container) : undefined
  return {ok: true, program: {argv, env: entry.env ?? {}, workingDir: entry.workingDir, imageID, ...(mapped ? {mapped} : {}), ...(files ? {files} : {})}}
}

/**
 * Whether an image is present on the machine, for imagePullPolicy Never: a
 * process node has no image store and pulls nothing, so an image is there when
 * the image map (the `--images` file, or the built-in map below it) has an
 * entry for it. Any other image is reported as the kubelet reports an image
 * it does not have (ErrImageNeverPull), even when the container has a command.
 */
export function imagePresent(image: string, images: ImageMap): boolean {
  return image !== '' && images.resolve(image) !== undefined
}

/**
 * Where an image map entry's program is not installed: the
 * CreateContainerError message, naming the image, the program and where it
 * was looked for, and how to map the image to something else.
 */
export function missingProgramMessage(container: V1Container, program: ResolvedProgram, path: string): string {
  const image = container.image ?? ''
  const file = program.argv[0] ?? ''
  const where = program.mapped?.builtIn ? "vnode's built-in image map" : `the image map ${program.mapped?.source ?? ''}`.trim()
  const looked = file.includes('/') ? `"${file}" does not exist or is not executable` : `looked for "${file}" in PATH=${path}`
  return (
    `image "${image}" runs the program "${file}" (entry "${program.mapped?.pattern}" of ${where}), which is not installed: ${looked}; ` +
    `install it, set command in the container spec, or map the image to another program with \`kubectl vnode up --images FILE\`, ` +
    `e.g. images: {"${suggestPattern(image)}": {command: ["/path/to/program"]}}`
  )
}

function suggestPattern(image: string): string {
  const noTag = imageCandidates(image).at(-1) ?? image
  return noTag ? `${noTag}*` : '*'
}

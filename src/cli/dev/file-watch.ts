import {execa} from 'execa'
import {watch, type FSWatcher} from 'node:fs'
import {readdir} from 'node:fs/promises'
import {join} from 'node:path'
import {matchesAny, relativePath, type WatchRoot} from './globs.js'

/** Changes closer together than this make one restart: an editor's save, a `git checkout`, a formatter's pass. */
export const DefaultDebounceMs = 300

export interface FileWatchOptions {
  cwd: string
  roots: WatchRoot[]
  /** Paths (relative to cwd) matching these are neither watched nor reported. */
  ignore: RegExp[]
  debounceMs?: number
  /** The changed paths of a quiet period, relative to cwd, none of them ignored. */
  onChange(paths: string[]): void
  /** Those of the paths the repository's ignore files exclude (default: `git check-ignore`). */
  gitIgnored?(cwd: string, paths: string[]): Promise<Set<string>>
}

/**
 * Watches directory trees for changes, one inotify watch per directory
 * (fs.watch's own recursion would also watch node_modules and .git, which
 * are ignored here before they are walked). A directory created later is
 * watched as it appears. Changes are gathered until none has come for the
 * debounce period, then reported once.
 */
export class FileWatcher {
  private readonly watchers = new Map<string, FSWatcher>()
  private pending = new Set<string>()
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor(private readonly o: FileWatchOptions) {}

  async start(): Promise<void> {
    for (const root of this.o.roots) await this.watchTree(root.dir)
  }

  close(): void {
    this.closed = true
    clearTimeout(this.timer)
    for (const w of this.watchers.values()) w.close()
    this.watchers.clear()
  }

  /** How many directories are watched. */
  get size(): number {
    return this.watchers.size
  }

  private ignored(path: string): boolean {
    return matchesAny(relativePath(this.o.cwd, path), this.o.ignore)
  }

  private async watchTree(dir: string): Promise<void> {
    if (this.closed || this.watchers.has(dir) || this.ignored(dir)) return
    let w: FSWatcher
    try {
      w = watch(dir, {persistent: false}, (_event, name) => {
        if (name) this.changed(join(dir, name.toString()))
      })
    } catch {
      // Gone already, or not readable: nothing there to watch.
      return
    }
    w.on('error', () => this.forget(dir))
    this.watchers.set(dir, w)
    const entries = await readdir(dir, {withFileTypes: true}).catch(() => [])
    for (const e of entries) if (e.isDirectory()) await this.watchTree(join(dir, e.name))
  }

  private forget(dir: string): void {
    this.watchers.get(dir)?.close()
    this.watchers.delete(dir)
  }

  private changed(path: string): void {
    if (this.closed || this.ignored(path)) return
    // A new directory is watched from now on (a file saved into it will count); a removed one is forgotten.
    void readdir(path).then(
      () => this.watchTree(path),
      () => this.forget(path),
    )
    if (!this.selected(path)) return
    this.pending.add(relativePath(this.o.cwd, path))
    clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.flush(), this.o.debounceMs ?? DefaultDebounceMs)
  }

  /** Inside a root, and matching its glob when it has one. */
  private selected(path: string): boolean {
    return this.o.roots.some((r) => {
      const inside = relativePath(r.dir, path)
      if (inside.startsWith('..')) return false
      return !r.only || r.only.test(relativePath(this.o.cwd, path))
    })
  }

  private async flush(): Promise<void> {
    const paths = [...this.pending]
    this.pending = new Set()
    const excluded = await (this.o.gitIgnored ?? gitIgnored)(this.o.cwd, paths).catch(() => new Set<string>())
    const kept = paths.filter((p) => !excluded.has(p)).sort()
    if (kept.length > 0 && !this.closed) this.o.onChange(kept)
  }
}

/** The paths the repository's ignore files exclude, by asking git (none outside a repository, or without git). */
export async function gitIgnored(cwd: string, paths: string[]): Promise<Set<string>> {
  if (paths.length === 0) return new Set()
  const r = await execa('git', ['check-ignore', '--', ...paths], {cwd, reject: false, timeout: 5_000})
  // 0: some are ignored (listed); 1: none; 128: not a repository.
  if (r.exitCode !== 0) return new Set()
  return new Set(String(r.stdout).split('\n').filter(Boolean))
}

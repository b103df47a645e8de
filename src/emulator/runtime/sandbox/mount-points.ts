import {chmodSync, chownSync, lstatSync, mkdirSync, statSync, writeFileSync, type Stats} from 'node:fs'
import {join} from 'node:path'
import {isWithin} from '../../../common/paths.js'
import {isRealEntry} from './host-root.js'
import {OwnTopLevel, type RootLayer} from './root-layer.js'

/**
 * Makes each mount point of a start that the host does not have as it is
 * (missing, or a link the view does not follow: viewPath) in the upper
 * directory of the overlay that shows it, before the overlays are mounted:
 * the directories on its way with the host's mode and owner (as a copy-up
 * would make them), then a directory, or an empty file for a file bound
 * there, as bwrap would make it. An overlay shows its lower layer live, so
 * an entry the host makes at that path between the plan and bwrap's bind
 * would otherwise be what the bind meets: a plain-mode node's real symlink
 * at its own pod's mountPath (volumes.ts), leading into that node's
 * owner-only pod directories. bwrap would follow it, and the container
 * would find its volume behind a path its user cannot walk, or the bind
 * would fail. An upper entry shows over whatever the lower layer gets
 * there, as a container's own mount point is made in its own root
 * filesystem by a runtime. A top-level mount point is made in the overlay
 * of `/` only when that overlay is the view's root (`rootShown`); on
 * bwrap's tmpfs root the view's top level is fixed at the start. Nothing is
 * made in a hidden path or a host mount bound over an overlay.
 */
export function pinMountPoints(layer: RootLayer, binds: readonly {source: string; target: string}[], opts: {rootShown: boolean; hidden: readonly string[]}): void {
  const asRoot = process.getuid?.() === 0
  for (const b of binds) {
    const t = b.target
    if (opts.hidden.some((h) => isWithin(h, t)) || [...layer.subMounts, ...layer.maskedMounts].some((m) => isWithin(m, t))) continue
    const parts = t.split('/').filter(Boolean)
    const [top] = parts
    if (top === undefined || OwnTopLevel.has(top)) continue
    const overlay = layer.overlays.find((o) => o.path === `/${top}`)
    // A directory of the overlay of `/` has no upper directory of its own until a write copies it up: made from `/` down.
    const ofRoot = overlay !== undefined && layer.root !== undefined && isWithin(layer.root, overlay.merged)
    const at =
      overlay && !ofRoot
        ? {upper: overlay.upper, host: overlay.path, rest: parts.slice(1)}
        : layer.rootUpper && (ofRoot || (opts.rootShown && !isRealEntry(`/${top}`)))
          ? {upper: layer.rootUpper, host: '/', rest: parts}
          : undefined
    if (at && at.rest.length > 0) pinPath(at, isNonDirectory(b.source), asRoot)
  }
}

/** One mount point below an overlay's lower directory `host`, made in its upper directory unless the host has the whole path. */
function pinPath(at: {upper: string; host: string; rest: string[]}, fileAtEnd: boolean, asRoot: boolean): void {
  const hostPaths = at.rest.map((_, i) => join(at.host, ...at.rest.slice(0, i + 1)))
  if (hostPaths.every(isRealEntry)) return
  for (let i = 0; i < at.rest.length; i++) {
    const made = join(at.upper, ...at.rest.slice(0, i + 1))
    if (lstatOrUndefined(made)) continue
    const last = i === at.rest.length - 1
    const st = lstatOrUndefined(hostPaths[i]!)
    if (!last && st?.isDirectory()) {
      mkdirSync(made)
      // The mode exactly (mkdir's is cut by the umask), the owner as root only: what a copy-up of that directory gives.
      chmodSync(made, st.mode & 0o7777)
      if (asRoot) chownSync(made, st.uid, st.gid)
    } else if (last && fileAtEnd) writeFileSync(made, '', {mode: 0o644})
    else mkdirSync(made, {mode: 0o755})
  }
}

function lstatOrUndefined(p: string): Stats | undefined {
  try {
    return lstatSync(p, {throwIfNoEntry: false})
  } catch {
    return undefined
  }
}

/** A bind source that is there and is not a directory: its mount point is a file. */
function isNonDirectory(p: string): boolean {
  try {
    return !statSync(p).isDirectory()
  } catch {
    return false
  }
}

// What the relay scenario needs of this host: its relay pod runs the host's
// python3 (the image python:3-alpine, by the built-in image map's base
// images) in a pod sandbox, which takes bwrap and root.
import {execFileSync} from 'node:child_process'

/** Why the relay scenario cannot run here, or undefined. */
export function relayUnavailable() {
  const works = (cmd, args) => {
    try {
      execFileSync(cmd, args, {stdio: 'ignore'})
      return true
    } catch {
      return false
    }
  }
  if (!works('python3', ['-c', 'import asyncio'])) return 'the relay pod runs the host python3 (with asyncio), which is missing'
  if (!works('bwrap', ['--version'])) return 'the relay pod runs in a pod sandbox, which needs bwrap'
  if (process.getuid?.() !== 0) return 'the relay pod runs in a pod sandbox, which needs root here'
  return undefined
}

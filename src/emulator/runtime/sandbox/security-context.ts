import {lstatSync} from 'node:fs'
import type {ContainerSecurity} from '../container/security-context.js'
import {hostProgram} from '../process/host-programs.js'
import type {ContainerSandboxSpec, SandboxSecurity} from './spec.js'

/**
 * A container's securityContext and host namespaces on the bubblewrap
 * command line, beside the file view of bwrap.ts.
 *
 * Namespaces are the kubelet's (NamespacesForPod): the PID namespace is the
 * pod's own unless hostPID, IPC the pod's own unless hostIPC, UTS the pod's
 * own (its hostname) unless hostNetwork, which keeps the host's hostname.
 *
 * Identity is applied by util-linux's setpriv, run by bwrap as the
 * sandbox's program (it execs the container's, which stays PID 1): user,
 * group, supplementary groups, the bounding set (no inheritable or
 * ambient capabilities, as containerd), no_new_privs. bwrap itself keeps
 * the full set for root, so setpriv may change user; the kernel's exec
 * rules then give a root process the bounding set as its effective set and
 * a non-root one none (as under runc). Privileged: the host's /dev.
 * procMount Default masks what the runtime masks in /proc (bwrap already
 * binds /proc/sys, sysrq-trigger, irq and bus read-only).
 */
export const SetprivProgram = 'setpriv'

/** The runtime's default masked paths (securitycontext defaultMaskedPaths, moby's list): files get /dev/null, directories an empty tmpfs. */
export const MaskedProcFiles = ['/proc/interrupts', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug']
export const MaskedDirs = ['/proc/asound', '/proc/acpi', '/proc/scsi', '/sys/firmware', '/sys/devices/virtual/powercap']

/** The /dev of the view: a fresh one, or the host's for a privileged container. */
export function devArgs(spec: ContainerSandboxSpec): string[] {
  return spec.security?.context.privileged ? ['--dev-bind', '/dev', '/dev'] : ['--dev', '/dev']
}

/** The namespaces of the sandbox (bwrap always makes a mount namespace). */
export function namespaceArgs(spec: ContainerSandboxSpec, pidNamespaceFd: number): string[] {
  const s: Partial<SandboxSecurity> = spec.security ?? {}
  const out: string[] = []
  if (spec.pidNamespaceOf) out.push('--pidns', String(pidNamespaceFd))
  else if (s.hostPID) {
    // The host's PID namespace: no --unshare-pid, and the program is not PID 1.
  } else if (spec.init) out.push('--unshare-pid')
  else out.push('--unshare-pid', '--as-pid-1')
  if (!s.hostIPC) out.push('--unshare-ipc')
  if (!s.hostNetwork) out.push('--unshare-uts', '--hostname', spec.hostname)
  return out
}

/**
 * The masks of procMount Default in `within` (/proc or /sys), after it is mounted; directories only where the host has
 * them (bwrap would make the mount point).
 */
export function maskArgs(spec: ContainerSandboxSpec, within: '/proc' | '/sys'): string[] {
  const id = spec.security?.context
  if (!id || id.privileged || id.procMount === 'Unmasked') return []
  const inside = (p: string) => p.startsWith(`${within}/`)
  const out = MaskedProcFiles.filter((p) => inside(p) && kindOf(p) === 'file').flatMap((p) => ['--ro-bind', '/dev/null', p])
  for (const d of MaskedDirs.filter((p) => inside(p) && kindOf(p) === 'dir')) out.push('--tmpfs', d, '--remount-ro', d)
  return out
}

/**
 * /proc entries belong to the sandbox's new /proc, of the same kernel: the host's answer holds (a kernel may lack some:
 * nothing to mask), and holds while vnode runs, so each of the fixed masked paths is looked at once, not at every start.
 */
function kindOf(p: string): 'file' | 'dir' | undefined {
  if (maskedKinds.has(p)) return maskedKinds.get(p)
  let kind: 'file' | 'dir' | undefined
  try {
    kind = lstatSync(p).isDirectory() ? 'dir' : 'file'
  } catch {
    kind = undefined
  }
  maskedKinds.set(p, kind)
  return kind
}

/** What each masked path is on this kernel (at most one entry per path of MaskedProcFiles and MaskedDirs). */
const maskedKinds = new Map<string, 'file' | 'dir' | undefined>()

/**
 * setpriv's argv for an identity: run before the container's program,
 * inside the sandbox (after bwrap's own setup, which needs root's
 * capabilities), and after nsenter for each command entering it (exec, probes, hooks).
 */
export function identityArgv(id: ContainerSecurity): string[] {
  const caps = id.capabilities.map((c) => `+${c.replace(/^CAP_/, '').toLowerCase()}`)
  return [
    hostProgram(SetprivProgram),
    `--reuid=${id.uid}`,
    `--regid=${id.gid}`,
    id.groups.length ? `--groups=${id.groups.join(',')}` : '--clear-groups',
    '--inh-caps=-all',
    `--bounding-set=${['-all', ...caps].join(',')}`,
    ...(id.noNewPrivs ? ['--no-new-privs'] : []),
    '--',
  ]
}

import type {V1Container, V1Pod, V1SecurityContext} from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {podDesc} from '../../../common/pods.js'

/**
 * A container's securityContext as the kubelet and containerd turn it into
 * a process: the effective context (pod-level fields under the
 * container's, securitycontext.DetermineEffectiveSecurityContext), the
 * runAsNonRoot check (verifyRunAsNonRoot, with its messages), the user,
 * group and supplementary groups (containerd's WithUserID, WithAdditionalGIDs
 * and the CRI's supplementalGroups), and the capability set (containerd's
 * default set, then WithCapabilities' add and drop). Pure but for the
 * host's /etc/passwd and /etc/group, read through `UserDatabase`: a
 * process node's image is the host, so its user database is the image's.
 */

/** containerd's default capabilities (oci/spec.go defaultUnixCaps), for a container that is not privileged. */
export const DefaultCapabilities: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
]

/** Every capability the kernel knows, in bit order (linux/capability.h up to CAP_CHECKPOINT_RESTORE, 40). */
export const KernelCapabilities: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_DAC_READ_SEARCH',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_LINUX_IMMUTABLE',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST',
  'CAP_NET_ADMIN',
  'CAP_NET_RAW',
  'CAP_IPC_LOCK',
  'CAP_IPC_OWNER',
  'CAP_SYS_MODULE',
  'CAP_SYS_RAWIO',
  'CAP_SYS_CHROOT',
  'CAP_SYS_PTRACE',
  'CAP_SYS_PACCT',
  'CAP_SYS_ADMIN',
  'CAP_SYS_BOOT',
  'CAP_SYS_NICE',
  'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG',
  'CAP_MKNOD',
  'CAP_LEASE',
  'CAP_AUDIT_WRITE',
  'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP',
  'CAP_MAC_OVERRIDE',
  'CAP_MAC_ADMIN',
  'CAP_SYSLOG',
  'CAP_WAKE_ALARM',
  'CAP_BLOCK_SUSPEND',
  'CAP_AUDIT_READ',
  'CAP_PERFMON',
  'CAP_BPF',
  'CAP_CHECKPOINT_RESTORE',
]

/** What the process of one container runs as and with. */
export interface ContainerSecurity {
  uid: number
  gid: number
  /** Supplementary groups, the primary group first (containerd's order). */
  groups: number[]
  /** The bounding set; also the effective and permitted sets when uid is 0 (a non-root process keeps none after exec). */
  capabilities: string[]
  /** allowPrivilegeEscalation: false. */
  noNewPrivs: boolean
  privileged: boolean
  readOnlyRootFilesystem: boolean
  /** Default masks /proc's sensitive files, as the runtime does; Unmasked leaves them. */
  procMount: 'Default' | 'Unmasked'
  seccomp: 'Unconfined' | 'RuntimeDefault' | 'Localhost'
  /** Which fields the spec set (pod or container), so a node without identity walls knows what it was asked. */
  asked: {user: boolean; group: boolean; groups: boolean; capabilities: boolean}
}

/** The user an image (here: an image map entry) names: a number, a name, or either with ":group". */
export interface ImageUser {
  uid?: number
  gid?: number
  /** A user name, unresolved (the kubelet's "non-numeric user"). */
  name?: string
}

export interface UserDatabase {
  /** /etc/passwd: name → uid and primary gid. */
  users: {name: string; uid: number; gid: number}[]
  /** /etc/group: gid and member names. */
  groups: {name: string; gid: number; members: string[]}[]
}

/** The host's /etc/passwd and /etc/group (missing files: empty). */
export function hostUserDatabase(): UserDatabase {
  const read = (p: string) => {
    try {
      return readFileSync(p, 'utf8').split('\n')
    } catch {
      return []
    }
  }
  const users = read('/etc/passwd')
    .map((l) => l.split(':'))
    .filter((f) => f.length >= 4)
    .map((f) => ({name: f[0], uid: Number(f[2]), gid: Number(f[3])}))
  const groups = read('/etc/group')
    .map((l) => l.split(':'))
    .filter((f) => f.length >= 4)
    .map((f) => ({name: f[0], gid: Number(f[2]), members: f[3] ? f[3].split(',') : []}))
  return {users, groups}
}

/** The image map's `user:` value ("1000", "1000:1000", "app", "app:staff"). */
export function parseImageUser(user: string | undefined): ImageUser | undefined {
  if (user === undefined || user === '') return undefined
  const [u, g] = user.split(':', 2)
  const out: ImageUser = /^\d+$/.test(u) ? {uid: Number(u)} : {name: u}
  if (g !== undefined && /^\d+$/.test(g)) out.gid = Number(g)
  return out
}

/** securitycontext.DetermineEffectiveSecurityContext: the pod's user fields, each replaced by the container's when it sets it. */
export function effectiveSecurityContext(pod: V1Pod, container: V1Container): V1SecurityContext {
  const p = pod.spec?.securityContext
  const fromPod: V1SecurityContext = p
    ? {
        ...(p.seLinuxOptions ? {seLinuxOptions: p.seLinuxOptions} : {}),
        ...(p.runAsUser !== undefined ? {runAsUser: p.runAsUser} : {}),
        ...(p.runAsGroup !== undefined ? {runAsGroup: p.runAsGroup} : {}),
        ...(p.runAsNonRoot !== undefined ? {runAsNonRoot: p.runAsNonRoot} : {}),
        ...(p.seccompProfile ? {seccompProfile: p.seccompProfile} : {}),
      }
    : {}
  const c = container.securityContext ?? {}
  const out: V1SecurityContext = {...fromPod}
  for (const [k, v] of Object.entries(c)) if (v !== undefined && v !== null) (out as Record<string, unknown>)[k] = v
  return out
}

/**
 * verifyRunAsNonRoot with the kubelet's messages; `image` is the user the
 * container would run as without runAsUser (undefined uid and name: root).
 */
export function verifyRunAsNonRoot(pod: V1Pod, container: V1Container, image: ImageUser): string | undefined {
  const sc = effectiveSecurityContext(pod, container)
  if (!sc.runAsNonRoot) return undefined
  const who = `(pod: ${JSON.stringify(podDesc(pod))}, container: ${container.name})`
  if (sc.runAsUser !== undefined) return sc.runAsUser === 0 ? `container's runAsUser breaks non-root policy ${who}` : undefined
  if (image.uid === undefined && image.name) return `container has runAsNonRoot and image has non-numeric user (${image.name}), cannot verify user is non-root ${who}`
  const uid = image.uid ?? 0
  if (uid === 0) return `container has runAsNonRoot and image will run as root ${who}`
  return undefined
}

/**
 * The capability set (containerd's WithCapabilities over its default set):
 * add ALL, then drop ALL, then each added, then each dropped, so
 * `drop: [ALL], add: [NET_BIND_SERVICE]` keeps that one. Privileged: every
 * capability. Names are taken as the API writes them (without CAP_);
 * an unknown one is refused as runc refuses it.
 */
export function containerCapabilities(sc: V1SecurityContext): {ok: true; capabilities: string[]} | {ok: false; message: string} {
  if (sc.privileged) return {ok: true, capabilities: [...KernelCapabilities]}
  const add = (sc.capabilities?.add ?? []).map((c) => c.toUpperCase())
  const drop = (sc.capabilities?.drop ?? []).map((c) => c.toUpperCase())
  let set = new Set(DefaultCapabilities)
  if (add.includes('ALL')) set = new Set(KernelCapabilities)
  if (drop.includes('ALL')) set = new Set()
  for (const c of add.filter((c) => c !== 'ALL')) {
    const name = `CAP_${c}`
    if (!KernelCapabilities.includes(name)) return {ok: false, message: `unknown capability "${name}"`}
    set.add(name)
  }
  for (const c of drop.filter((c) => c !== 'ALL')) set.delete(`CAP_${c}`)
  return {ok: true, capabilities: KernelCapabilities.filter((c) => set.has(c))}
}

export interface IdentityDefaults {
  /** What the container runs as without runAsUser: the image map entry's user, else this uid and gid (vnode's own). */
  image?: ImageUser
  uid: number
  gid: number
}

export type SecurityResult = {ok: true; security: ContainerSecurity} | {ok: false; reason: 'CreateContainerConfigError' | 'CreateContainerError'; message: string}

/**
 * Everything the runtime applies for one container's securityContext, or
 * the kubelet's (or runc's) refusal. The user: runAsUser, else the image's
 * (resolved in the user database), else vnode's own. The primary group:
 * runAsGroup, else the image's, else that user's in /etc/passwd, else 0.
 * Supplementary groups: the primary group, then (policy Merge) the user's
 * groups in /etc/group, then fsGroup and supplementalGroups.
 */
export function containerSecurity(pod: V1Pod, container: V1Container, defaults: IdentityDefaults, db: UserDatabase): SecurityResult {
  const sc = effectiveSecurityContext(pod, container)
  const image: ImageUser = defaults.image ?? {uid: defaults.uid, gid: defaults.gid}
  const nonRoot = verifyRunAsNonRoot(pod, container, image)
  if (nonRoot) return {ok: false, reason: 'CreateContainerConfigError', message: nonRoot}
  let uid: number
  let imageGid = image.gid
  if (sc.runAsUser !== undefined) uid = sc.runAsUser
  else if (image.uid !== undefined) uid = image.uid
  else {
    const named = db.users.find((u) => u.name === image.name)
    // runc: "unable to find user NAME: no matching entries in passwd file".
    if (!named) return {ok: false, reason: 'CreateContainerError', message: `unable to find user ${image.name}: no matching entries in passwd file`}
    uid = named.uid
    imageGid ??= named.gid
  }
  const entry = db.users.find((u) => u.uid === uid)
  const gid = sc.runAsGroup ?? (sc.runAsUser === undefined ? imageGid : undefined) ?? entry?.gid ?? 0
  const podSc = pod.spec?.securityContext
  const groups: number[] = [gid]
  if (podSc?.supplementalGroupsPolicy !== 'Strict' && entry) for (const g of db.groups) if (g.members.includes(entry.name)) groups.push(g.gid)
  if (podSc?.fsGroup !== undefined) groups.push(podSc.fsGroup)
  for (const g of podSc?.supplementalGroups ?? []) groups.push(g)
  const caps = containerCapabilities(sc)
  if (!caps.ok) return {ok: false, reason: 'CreateContainerError', message: caps.message}
  const seccomp = sc.seccompProfile?.type ?? 'Unconfined'
  return {
    ok: true,
    security: {
      uid,
      gid,
      groups: [...new Set(groups)],
      capabilities: caps.capabilities,
      noNewPrivs: sc.allowPrivilegeEscalation === false,
      privileged: sc.privileged === true,
      readOnlyRootFilesystem: sc.readOnlyRootFilesystem === true,
      procMount: sc.procMount === 'Unmasked' ? 'Unmasked' : 'Default',
      seccomp: seccomp === 'RuntimeDefault' || seccomp === 'Localhost' ? seccomp : 'Unconfined',
      asked: {
        user: sc.runAsUser !== undefined,
        group: sc.runAsGroup !== undefined,
        groups: podSc?.fsGroup !== undefined || (podSc?.supplementalGroups?.length ?? 0) > 0,
        capabilities: sc.privileged === true || (sc.capabilities?.add?.length ?? 0) > 0 || (sc.capabilities?.drop?.length ?? 0) > 0,
      },
    },
  }
}

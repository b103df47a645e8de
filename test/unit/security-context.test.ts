import {describe, expect, test} from '@jest/globals'
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {
  containerCapabilities,
  containerSecurity,
  DefaultCapabilities,
  effectiveSecurityContext,
  KernelCapabilities,
  parseImageUser,
  type UserDatabase,
  verifyRunAsNonRoot,
} from '../../src/emulator/runtime/container/security-context.js'
import {identityArgv, namespaceArgs} from '../../src/emulator/runtime/sandbox/security-context.js'
import {nodeWalls, unmetWall, wallNames, withFsWalls} from '../../src/emulator/runtime/sandbox/walls.js'
import {enterArgv} from '../../src/emulator/runtime/sandbox/spawn.js'
import {sandboxedProcess} from '../../src/emulator/runtime/process/sandboxed-start.js'
import {admitPod, type AdmissionNode} from '../../src/emulator/pods/admission.js'
import {isLocalControlPlane} from '../../src/cli/allowed-namespaces.js'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {createCa} from '../../src/common/pki.js'
import {LocalClusterCaName} from '../../src/cluster/cluster-pki.js'
import {admissionPolicyObjects, targetsNodeExpression} from '../../src/cli/admission-policy.js'

const db: UserDatabase = {
  users: [
    {name: 'root', uid: 0, gid: 0},
    {name: 'app', uid: 1000, gid: 1000},
  ],
  groups: [
    {name: 'root', gid: 0, members: []},
    {name: 'app', gid: 1000, members: []},
    {name: 'staff', gid: 50, members: ['app']},
  ],
}

function pod(spec: Partial<V1Pod['spec']> = {}, container: Partial<V1Container> = {}): {pod: V1Pod; c: V1Container} {
  const c: V1Container = {name: 'main', image: 'sh', ...container}
  return {pod: {metadata: {name: 'p', namespace: 'ns', uid: 'u1'}, spec: {containers: [c], ...spec}}, c}
}

const asRoot = {uid: 0, gid: 0}

describe('securityContext: the effective context', () => {
  test("the container's fields win over the pod's, field by field", () => {
    const {pod: p, c} = pod({securityContext: {runAsUser: 1, runAsGroup: 2, runAsNonRoot: true}}, {securityContext: {runAsUser: 5}})
    expect(effectiveSecurityContext(p, c)).toEqual({runAsUser: 5, runAsGroup: 2, runAsNonRoot: true})
  })
})

describe('runAsNonRoot: the kubelet messages', () => {
  test('the image runs as root', () => {
    const {pod: p, c} = pod({securityContext: {runAsNonRoot: true}})
    expect(verifyRunAsNonRoot(p, c, {uid: 0})).toBe('container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: main)')
    expect(verifyRunAsNonRoot(p, c, {})).toBe('container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: main)')
  })
  test('a non-numeric image user', () => {
    const {pod: p, c} = pod({securityContext: {runAsNonRoot: true}})
    expect(verifyRunAsNonRoot(p, c, {name: 'app'})).toBe('container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: "p_ns(u1)", container: main)')
  })
  test('runAsUser 0, and a non-root runAsUser passes', () => {
    const {pod: p, c} = pod({securityContext: {runAsNonRoot: true, runAsUser: 0}})
    expect(verifyRunAsNonRoot(p, c, {uid: 1000})).toBe(`container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: main)`)
    const ok = pod({securityContext: {runAsNonRoot: true, runAsUser: 7}})
    expect(verifyRunAsNonRoot(ok.pod, ok.c, {uid: 0})).toBeUndefined()
  })
  test('an image map user', () => {
    expect(parseImageUser('1000:2000')).toEqual({uid: 1000, gid: 2000})
    expect(parseImageUser('app')).toEqual({name: 'app'})
    expect(parseImageUser(undefined)).toBeUndefined()
  })
})

describe("capabilities from containerd's default set", () => {
  const caps = (sc: Parameters<typeof containerCapabilities>[0]) => {
    const r = containerCapabilities(sc)
    if (!r.ok) throw new Error(r.message)
    return r.capabilities
  }
  test('default: the 14 of the runtime, no CAP_SYS_ADMIN', () => {
    expect(caps({}).sort()).toEqual([...DefaultCapabilities].sort())
    expect(caps({})).not.toContain('CAP_SYS_ADMIN')
  })
  test('drop ALL then add one keeps that one; add ALL then drop one; individual add and drop', () => {
    expect(caps({capabilities: {drop: ['ALL'], add: ['NET_BIND_SERVICE']}})).toEqual(['CAP_NET_BIND_SERVICE'])
    expect(caps({capabilities: {add: ['ALL'], drop: ['CHOWN']}})).toEqual(KernelCapabilities.filter((c) => c !== 'CAP_CHOWN'))
    const some = caps({capabilities: {add: ['SYS_ADMIN'], drop: ['NET_RAW', 'MKNOD']}})
    expect(some).toContain('CAP_SYS_ADMIN')
    expect(some).not.toContain('CAP_NET_RAW')
    expect(some).toHaveLength(DefaultCapabilities.length - 1)
  })
  test('privileged: all of them; an unknown name is refused as runc refuses it', () => {
    expect(caps({privileged: true, capabilities: {drop: ['ALL']}})).toEqual([...KernelCapabilities])
    expect(containerCapabilities({capabilities: {add: ['CAP_CHOWN']}})).toEqual({ok: false, message: 'unknown capability "CAP_CAP_CHOWN"'})
  })
})

describe('the identity', () => {
  const security = (spec: Partial<V1Pod['spec']>, container: Partial<V1Container> = {}, defaults: Parameters<typeof containerSecurity>[2] = asRoot) => {
    const {pod: p, c} = pod(spec, container)
    const r = containerSecurity(p, c, defaults, db)
    if (!r.ok) throw new Error(r.message)
    return r.security
  }
  test('runAsUser with its /etc/passwd group, its /etc/group memberships (Merge), fsGroup, supplementalGroups', () => {
    const s = security({securityContext: {runAsUser: 1000, fsGroup: 2000, supplementalGroups: [4000]}})
    expect([s.uid, s.gid]).toEqual([1000, 1000])
    expect(s.groups).toEqual([1000, 50, 2000, 4000])
  })
  test('Strict leaves out /etc/group; runAsGroup wins; an unknown uid gets gid 0', () => {
    expect(security({securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroupsPolicy: 'Strict'}}).groups).toEqual([3000])
    expect(security({securityContext: {runAsUser: 4242}}).gid).toBe(0)
  })
  test("without runAsUser: the image map's user, else vnode's own", () => {
    expect(security({}, {}, {uid: 1234, gid: 99}).uid).toBe(1234)
    const named = security({}, {}, {...asRoot, image: {name: 'app'}})
    expect([named.uid, named.gid]).toEqual([1000, 1000])
    const {pod: p, c} = pod({})
    expect(containerSecurity(p, c, {...asRoot, image: {name: 'nobody-here'}}, db)).toEqual({
      ok: false,
      reason: 'CreateContainerError',
      message: 'unable to find user nobody-here: no matching entries in passwd file',
    })
  })
  test('the setpriv argv: user, group, groups, no inheritable capabilities, the bounding set, no_new_privs', () => {
    const s = security(
      {securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroupsPolicy: 'Strict'}},
      {securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL'], add: ['KILL', 'CHOWN']}}},
    )
    expect(identityArgv(s).slice(1)).toEqual(['--reuid=1000', '--regid=3000', '--groups=3000', '--inh-caps=-all', '--bounding-set=-all,+chown,+kill', '--no-new-privs', '--'])
    expect(identityArgv(s)[0]).toMatch(/setpriv$/)
  })
})

describe('host namespaces on the bwrap command line', () => {
  const base = {hostname: 'web', binds: [], hide: []}
  const ctx = containerSecurityOf({})
  test('own PID (PID 1), IPC and UTS by default; hostPID, hostIPC, hostNetwork keep the host ones', () => {
    expect(namespaceArgs(base, 5)).toEqual(['--unshare-pid', '--as-pid-1', '--unshare-ipc', '--unshare-uts', '--hostname', 'web'])
    expect(namespaceArgs({...base, security: {context: ctx, applyIdentity: true, hostPID: true, hostIPC: true, hostNetwork: true}}, 5)).toEqual([])
    expect(namespaceArgs({...base, pidNamespaceOf: 42}, 5)).toEqual(['--pidns', '5', '--unshare-ipc', '--unshare-uts', '--hostname', 'web'])
  })

  test("exec joins the container's IPC namespace with its mount, UTS and PID ones, unless hostIPC", () => {
    const nsenter = (argv: string[]) => argv.slice(argv.findIndex((a) => a.endsWith('/nsenter')))
    const own = sandboxedProcess({...base, security: {context: ctx, applyIdentity: true}})
    expect(own.hostIPC).toBeUndefined()
    expect(nsenter(enterArgv(42, '/app', {network: own.netns, hostIPC: own.hostIPC}))).toEqual([
      expect.stringMatching(/\/nsenter$/),
      '--target=42',
      '--mount',
      '--uts',
      '--ipc',
      '--pid',
      '--root',
      '--wdns=/app',
      '--',
    ])
    const host = sandboxedProcess({...base, security: {context: ctx, applyIdentity: true, hostIPC: true}})
    expect(host.hostIPC).toBe(true)
    expect(enterArgv(42, '/', {network: true, hostIPC: host.hostIPC})).not.toContain('--ipc')
    // Unprivileged: the layer's user namespace first, then the same namespaces; cgroups before all of them.
    const argv = enterArgv(42, '/', {network: false, layerUserNamespaceOf: 41}, ['/sys/fs/cgroup/a/cgroup.procs'])
    expect(argv.slice(argv.indexOf('--target=42'))).toEqual(['--target=42', '--user=/proc/41/ns/user', '--preserve-credentials', '--mount', '--uts', '--ipc', '--pid', '--root', '--wdns=/', '--'])
    expect(argv.slice(3, 6)).toEqual(['vnode-place', '/sys/fs/cgroup/a/cgroup.procs', '--'])
  })
})

function containerSecurityOf(spec: Partial<V1Pod['spec']>) {
  const {pod: p, c} = pod(spec)
  const r = containerSecurity(p, c, asRoot, db)
  if (!r.ok) throw new Error(r.message)
  return r.security
}

describe('the walls a node cannot build', () => {
  test('as root with the sandbox: any user, a read-only root', () => {
    const w = nodeWalls('namespaces', 0, 0, [0])
    const {pod: p, c} = pod({securityContext: {runAsUser: 1000}})
    expect(unmetWall(p, c, containerSecurityOf({securityContext: {runAsUser: 1000}}), w)).toBeUndefined()
    expect(wallNames(w)).toEqual(['mount', 'pid', 'ipc', 'uts', 'no-new-privs', 'proc-masks', 'users', 'capabilities', 'read-only-root'])
    const ro = pod({}, {securityContext: {readOnlyRootFilesystem: true}})
    const s = containerSecurity(ro.pod, ro.c, asRoot, db)
    expect(s.ok && unmetWall(ro.pod, ro.c, s.security, w)).toBeUndefined()
    expect(s.ok && unmetWall(ro.pod, ro.c, s.security, nodeWalls('none', 0, 0, [0]))).toMatch(
      /^securityContext\.readOnlyRootFilesystem cannot be honoured on this node: pods run as bare host processes/,
    )
  })
  test('the filesystem walls are named only when up settled them: a writable layer where the trial overlay worked, hidden paths with the fs walls on', () => {
    const root = nodeWalls('namespaces', 0, 0, [0])
    const Base = ['mount', 'pid', 'ipc', 'uts', 'no-new-privs', 'proc-masks', 'users', 'capabilities', 'read-only-root']
    expect(wallNames(withFsWalls(root, {layer: 'root', hide: ['/root/.kube']}))).toEqual([...Base, 'writable-layer', 'hidden-paths'])
    // The overlay trial failed (walls-fs.ts settles no layer): the host is read-only in every container, still hidden paths.
    expect(wallNames(withFsWalls(root, {hide: ['/root/.kube']}))).toEqual([...Base, 'hidden-paths'])
    // --fs-walls off: neither.
    expect(wallNames(withFsWalls(root, undefined))).toEqual(Base)
    const unprivileged = wallNames(withFsWalls(nodeWalls('namespaces', 1000, 1000, [1000]), {layer: 'user-namespace', hide: []}))
    expect(unprivileged.slice(-4)).toEqual(['user-1000-only', 'read-only-root', 'writable-layer', 'hidden-paths'])
    // Without a sandbox there is nothing to build them in, whatever was settled.
    expect(wallNames(withFsWalls(nodeWalls('none', 0, 0, [0]), {layer: 'root', hide: []}))).toEqual(['user-0-only'])
    // A refusal lists the walls the annotation does.
    const other = pod({securityContext: {runAsUser: 2000}})
    const o = containerSecurity(other.pod, other.c, {uid: 1000, gid: 1000}, db)
    expect(o.ok && unmetWall(other.pod, other.c, o.security, withFsWalls(nodeWalls('namespaces', 1000, 1000, [1000]), {hide: []}))).toMatch(
      /\(walls: mount,pid,ipc,uts,no-new-privs,proc-masks,user-1000-only,read-only-root,hidden-paths\)$/,
    )
  })
  test("unprivileged: only vnode's user and groups; privileged refused", () => {
    const w = nodeWalls('namespaces', 1000, 1000, [1000, 50])
    const mine = pod({})
    const s = containerSecurity(mine.pod, mine.c, {uid: 1000, gid: 1000}, db)
    expect(s.ok && unmetWall(mine.pod, mine.c, s.security, w)).toBeUndefined()
    const other = pod({securityContext: {runAsUser: 2000}})
    const o = containerSecurity(other.pod, other.c, {uid: 1000, gid: 1000}, db)
    expect(o.ok && unmetWall(other.pod, other.c, o.security, w)).toMatch(/^runAsUser 2000 cannot be honoured on this node: vnode runs as uid 1000/)
    const fs = pod({securityContext: {fsGroup: 3000}})
    const f = containerSecurity(fs.pod, fs.c, {uid: 1000, gid: 1000}, db)
    expect(f.ok && unmetWall(fs.pod, fs.c, f.security, w)).toMatch(/^supplementary groups 3000/)
    const priv = pod({}, {securityContext: {privileged: true}})
    const pr = containerSecurity(priv.pod, priv.c, {uid: 1000, gid: 1000}, db)
    expect(pr.ok && unmetWall(priv.pod, priv.c, pr.security, w)).toMatch(/^securityContext\.privileged cannot/)
  })
  test('no sandbox, as root: dropped capabilities and no_new_privs cannot be honoured', () => {
    const w = nodeWalls('none', 0, 0, [0])
    const drop = pod({}, {securityContext: {capabilities: {drop: ['ALL']}}})
    const d = containerSecurity(drop.pod, drop.c, asRoot, db)
    expect(d.ok && unmetWall(drop.pod, drop.c, d.security, w)).toMatch(/^securityContext\.capabilities cannot be honoured on this node: pods run as bare host processes \(--sandbox none\)/)
    const nnp = pod({}, {securityContext: {allowPrivilegeEscalation: false}})
    const n = containerSecurity(nnp.pod, nnp.c, asRoot, db)
    expect(n.ok && unmetWall(nnp.pod, nnp.c, n.security, w)).toMatch(/allowPrivilegeEscalation: false cannot be honoured/)
    const plain = pod({})
    const pl = containerSecurity(plain.pod, plain.c, asRoot, db)
    expect(pl.ok && unmetWall(plain.pod, plain.c, pl.security, w)).toBeUndefined()
    expect(wallNames(w)).toEqual(['user-0-only'])
  })
})

describe('who may run pods here', () => {
  const node: AdmissionNode = {name: 'n1', labels: {}, taints: [], allocatable: {pods: '10'}, allowedNamespaces: ['team-a']}
  test('a pod from a namespace not allowed is refused first, with its reason; an allowed one and a static pod pass', () => {
    const {pod: p} = pod({nodeName: 'n1'})
    expect(admitPod(p, node, [])).toEqual({
      admit: false,
      reason: 'NamespaceNotAllowed',
      message: 'namespace "ns" may not run pods on node "n1" (allowed: team-a; see kubectl vnode up --allowed-namespaces)',
    })
    expect(admitPod({...p, metadata: {...p.metadata, namespace: 'team-a'}}, node, [])).toEqual({admit: true})
    expect(admitPod({...p, metadata: {...p.metadata, annotations: {'kubernetes.io/config.source': 'file'}}}, node, [])).toEqual({admit: true})
    expect(admitPod(p, {...node, allowedNamespaces: undefined}, [])).toEqual({admit: true})
  })
  test('the local control plane: loopback and the CA of cluster up', () => {
    expect(isLocalControlPlane('https://10.0.0.1:6443', undefined)).toBe(false)
    expect(isLocalControlPlane('https://127.0.0.1:6443', undefined)).toBe(false)
  })
  test("the local control plane on its own device's address (cluster up as root), never on another address", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vnode-ca-'))
    try {
      const ca = readFileSync((await createCa(dir, LocalClusterCaName)).cert, 'utf8')
      const iface = (address: string) => [{address, netmask: '255.255.255.255', family: 'IPv4' as const, mac: '', internal: false, cidr: `${address}/32`}]
      const interfaces = {eth0: iface('192.0.2.2'), 'vnode-svc1': iface('198.18.0.2')}
      expect(isLocalControlPlane('https://198.18.0.2:6443', ca, interfaces)).toBe(true)
      expect(isLocalControlPlane('https://127.0.0.1:6443', ca, interfaces)).toBe(true)
      expect(isLocalControlPlane('https://192.0.2.2:6443', ca, interfaces)).toBe(false)
      expect(isLocalControlPlane('https://198.18.0.3:6443', ca, interfaces)).toBe(false)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})

describe('the admission policy of a node', () => {
  test('owned by the Node; denies pods bound to it or tolerating its taints unless the user is named', () => {
    const node = {metadata: {name: 'n1', uid: 'node-uid'}, spec: {taints: [{key: 'virtual-kubelet.io/provider', value: 'vnode', effect: 'NoSchedule'}]}}
    const {policy, binding} = admissionPolicyObjects(node, ['bob', 'alice', 'bob'])
    expect(policy.metadata?.ownerReferences).toEqual([{apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'node-uid'}])
    expect(binding.spec).toEqual({policyName: 'vnode-node-n1', validationActions: ['Deny']})
    expect(policy.spec?.validations?.[0].expression).toBe('!variables.targetsNode || request.userInfo.username in ["alice", "bob"]')
    const targets = targetsNodeExpression(node)
    expect(targets).toContain('object.spec.nodeName == "n1"')
    expect(targets).toContain('t.key == "virtual-kubelet.io/provider"')
    expect(targetsNodeExpression({metadata: {name: 'n2'}, spec: {}})).toBe('(has(object.spec.nodeName) && object.spec.nodeName == "n2")')
  })
})

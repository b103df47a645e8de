import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {readlinkSync} from 'node:fs'
import {hostname} from 'node:os'
import {KubectlFixture} from './kubectl-fixture.js'
import {createNamespace, deleteNamespace, describeE2e, kubectl, startVnode, stopAllVnodes, uniqueName, vnode, type VnodeProcess, waitFor} from './helpers.js'

/** A busybox-like shell container that prints what it is (the host's /bin/sh: a process node's image is the host). */
function shell(name: string, script: string, securityContext?: Record<string, unknown>) {
  return {name, image: 'sh', command: ['/bin/sh', '-c', script], ...(securityContext ? {securityContext} : {})}
}

const Status = 'grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status'

/** containerd's default set (CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE) as /proc prints it. */
const DefaultCapsHex = '00000000a80425fb'

function field(out: string, name: string): string | undefined {
  return new RegExp(`^${name}:\\s*(\\S+)`, 'm').exec(out)?.[1]
}

describeE2e('securityContext as the kubelet applies it (sandbox, as root)', () => {
  const f = new KubectlFixture('secctx')

  beforeAll(async () => {
    await f.setUp(['--sandbox', 'namespaces'])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  async function output(name: string): Promise<string> {
    await f.waitRow(name, (r) => r.status === 'Completed' || r.status === 'Error', 'to finish')
    const r = await f.logs(name)
    expect(r.exitCode).toBe(0)
    return r.stdout
  }

  test('the node says its walls', async () => {
    const r = await kubectl(['get', 'node', f.nodeName, '-o', 'jsonpath={.metadata.annotations.vnode\\.dev/walls}'])
    expect(r.stdout.split(',')).toEqual(expect.arrayContaining(['mount', 'pid', 'users', 'capabilities', 'no-new-privs', 'writable-layer', 'hidden-paths']))
  })

  test('runAsUser, runAsGroup, supplementalGroups and fsGroup: id, no capabilities left to a non-root user, an emptyDir of the fsGroup', async () => {
    await f.create({
      metadata: {name: 'ids'},
      spec: {
        restartPolicy: 'Never',
        securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], fsGroup: 2000, supplementalGroupsPolicy: 'Strict'},
        volumes: [{name: 'data', emptyDir: {}}],
        containers: [
          {
            ...shell('main', `id; ${Status}; stat -c 'data %g %A' /data; touch /data/f && stat -c 'file %u %g' /data/f`, {allowPrivilegeEscalation: false}),
            volumeMounts: [{name: 'data', mountPath: '/data'}],
          },
        ],
      },
    })
    const out = await output('ids')
    expect(out).toMatch(/^uid=1000\S* gid=3000\S* groups=3000\S*,2000\S*,4000\S*$/m)
    expect(field(out, 'CapEff')).toBe('0000000000000000')
    expect(field(out, 'CapBnd')).toBe(DefaultCapsHex)
    expect(field(out, 'NoNewPrivs')).toBe('1')
    expect(out).toMatch(/^data 2000 drwxrwsrwx$/m)
    expect(out).toMatch(/^file 1000 2000$/m)
  })

  test("root gets containerd's default capabilities (no CAP_SYS_ADMIN); drop ALL with one added keeps that one; privileged gets every one", async () => {
    await f.create({metadata: {name: 'caps-default'}, spec: {restartPolicy: 'Never', containers: [shell('main', `id -u; ${Status}`)]}})
    await f.create({
      metadata: {name: 'caps-dropped'},
      spec: {restartPolicy: 'Never', containers: [shell('main', Status, {capabilities: {drop: ['ALL'], add: ['NET_BIND_SERVICE']}})]},
    })
    await f.create({metadata: {name: 'caps-privileged'}, spec: {restartPolicy: 'Never', containers: [shell('main', `${Status}; ls /dev | wc -l`, {privileged: true})]}})
    const def = await output('caps-default')
    expect(def.split('\n')[0]).toBe('0')
    expect(field(def, 'CapEff')).toBe(DefaultCapsHex)
    const dropped = await output('caps-dropped')
    expect(field(dropped, 'CapEff')).toBe('0000000000000400')
    const privileged = await output('caps-privileged')
    const own = BigInt(`0x${field(privileged, 'CapEff')}`)
    // Every capability this host gives its own root (a VM may withhold one from everything).
    const host = /^CapBnd:\s*(\S+)/m.exec(await import('node:fs').then((fs) => fs.readFileSync('/proc/self/status', 'utf8')))![1]
    expect(own).toBe(BigInt(`0x${host}`))
    expect(own & (1n << 21n)).not.toBe(0n)
    // The host's /dev, not the sandbox's handful of nodes.
    expect(Number(privileged.trim().split('\n').at(-1))).toBeGreaterThan(20)
  })

  test("runAsNonRoot: a container that would run as root waits in CreateContainerConfigError with the kubelet's message", async () => {
    const pod = await f.create({metadata: {name: 'nonroot'}, spec: {securityContext: {runAsNonRoot: true}, containers: [shell('main', 'sleep 30')]}})
    const message = `container has runAsNonRoot and image will run as root (pod: "nonroot_${f.ns}(${pod.metadata!.uid})", container: main)`
    const row = await f.waitRow('nonroot', (r) => r.status === 'CreateContainerConfigError', 'to be refused')
    expect(row.ready).toBe('0/1')
    expect(await f.jsonpath('nonroot', '{.status.containerStatuses[0].state.waiting.message}')).toBe(message)
    await f.waitDescribe('nonroot', new RegExp(`Warning\\s+Failed\\s+.*Error: container has runAsNonRoot and image will run as root`))
    // runAsUser 0 breaks the policy with its own message.
    await f.create({metadata: {name: 'nonroot-zero'}, spec: {securityContext: {runAsNonRoot: true, runAsUser: 0}, containers: [shell('main', 'sleep 30')]}})
    await f.waitRow('nonroot-zero', (r) => r.status === 'CreateContainerConfigError', 'to be refused')
    expect(await f.jsonpath('nonroot-zero', '{.status.containerStatuses[0].state.waiting.message}')).toMatch(/^container's runAsUser breaks non-root policy \(pod: "nonroot-zero_/)
    // And with a non-root user it runs.
    await f.create({metadata: {name: 'nonroot-ok'}, spec: {restartPolicy: 'Never', securityContext: {runAsNonRoot: true, runAsUser: 1000}, containers: [shell('main', 'id -u')]}})
    expect((await output('nonroot-ok')).trim()).toBe('1000')
  })

  test("kubectl exec runs as the container's user, with its capabilities", async () => {
    await f.create({metadata: {name: 'exec-as'}, spec: {terminationGracePeriodSeconds: 1, securityContext: {runAsUser: 1000, runAsGroup: 3000}, containers: [shell('main', 'sleep 300')]}})
    await f.waitRow('exec-as', (r) => r.status === 'Running', 'to run')
    const r = await kubectl(['exec', '-n', f.ns, 'exec-as', '--', '/bin/sh', '-c', `id -u; id -g; ${Status}`])
    expect(r.exitCode).toBe(0)
    expect(r.stdout.split('\n').slice(0, 2)).toEqual(['1000', '3000'])
    expect(field(r.stdout, 'CapEff')).toBe('0000000000000000')
    expect(field(r.stdout, 'CapBnd')).toBe(DefaultCapsHex)
  })

  test('readOnlyRootFilesystem: a write outside the volumes fails with EROFS', async () => {
    await f.create({metadata: {name: 'rofs'}, spec: {restartPolicy: 'Never', containers: [shell('main', 'touch /rofs-marker; echo rc=$$?', {readOnlyRootFilesystem: true})]}})
    const out = await output('rofs')
    expect(out).toMatch(/Read-only file system/)
    expect(out).toMatch(/^rc=1$/m)
  })

  test("hostPID sees the host's processes; hostNetwork has the host's hostname; a pod of its own has neither", async () => {
    const script = `echo pid=$$$$; test -e /proc/${process.pid} && echo sees-vnode; hostname`
    await f.create({metadata: {name: 'hostpid'}, spec: {restartPolicy: 'Never', hostPID: true, hostNetwork: true, containers: [shell('main', script)]}})
    await f.create({metadata: {name: 'ownpid'}, spec: {restartPolicy: 'Never', containers: [shell('main', script)]}})
    const host = await output('hostpid')
    expect(host).toMatch(/^sees-vnode$/m)
    expect(host).not.toMatch(/^pid=1$/m)
    expect(host.trim().split('\n').at(-1)).toBe(hostname())
    const own = await output('ownpid')
    expect(own).toMatch(/^pid=1$/m)
    expect(own).not.toMatch(/sees-vnode/)
    expect(own.trim().split('\n').at(-1)).toBe('ownpid')
  })

  test("kubectl exec joins the container's IPC namespace: its own, or the host's with hostIPC", async () => {
    const hostIpc = readlinkSync('/proc/self/ns/ipc')
    await f.create({metadata: {name: 'ipc-own'}, spec: {terminationGracePeriodSeconds: 1, containers: [shell('main', 'sleep 300')]}})
    await f.create({metadata: {name: 'ipc-host'}, spec: {terminationGracePeriodSeconds: 1, hostIPC: true, containers: [shell('main', 'sleep 300')]}})
    const namespaces = async (name: string) => {
      await f.waitRow(name, (r) => r.status === 'Running', 'to run')
      // The exec'd shell's and the container's main process's (PID 1 of its PID namespace).
      const r = await kubectl(['exec', '-n', f.ns, name, '--', '/bin/sh', '-c', 'readlink /proc/self/ns/ipc /proc/1/ns/ipc'])
      expect(r.exitCode).toBe(0)
      return r.stdout.trim().split('\n')
    }
    const [execOwn, mainOwn] = await namespaces('ipc-own')
    expect(execOwn).toMatch(/^ipc:\[\d+\]$/)
    expect(execOwn).toBe(mainOwn)
    expect(execOwn).not.toBe(hostIpc)
    const [execHost, mainHost] = await namespaces('ipc-host')
    expect([execHost, mainHost]).toEqual([hostIpc, hostIpc])
  })
})

describeE2e('who may run pods here (--allowed-namespaces)', () => {
  let node: VnodeProcess
  const name = uniqueName('allowns')
  const allowed = uniqueName('allowed')
  const other = uniqueName('other')
  let c: Awaited<ReturnType<typeof import('./helpers.js').clients>>

  beforeAll(async () => {
    const {clients} = await import('./helpers.js')
    c = await clients()
    await createNamespace(c.core, allowed)
    await createNamespace(c.core, other)
    node = startVnode(name, ['--allowed-namespaces', allowed])
    await node.ready()
  })
  afterAll(async () => {
    await deleteNamespace(c?.core, allowed)
    await deleteNamespace(c?.core, other)
    await stopAllVnodes()
  })

  test('a pod from another namespace fails admission with its reason and a Warning event, and runs nothing; one from an allowed namespace runs', async () => {
    const spec = {nodeName: name, restartPolicy: 'Never', containers: [shell('main', 'echo ran')]}
    await c.core.createNamespacedPod({namespace: other, body: {metadata: {name: 'refused'}, spec}})
    await c.core.createNamespacedPod({namespace: allowed, body: {metadata: {name: 'admitted'}, spec}})
    const refused = await waitFor(async () => {
      const p = await c.core.readNamespacedPod({namespace: other, name: 'refused'})
      return p.status?.phase === 'Failed' ? p : undefined
    }, 'the pod of the other namespace to fail')
    expect(refused.status?.reason).toBe('NamespaceNotAllowed')
    expect(refused.status?.message).toBe(`Pod was rejected: namespace "${other}" may not run pods on node "${name}" (allowed: ${allowed}; see kubectl vnode up --allowed-namespaces)`)
    expect(refused.status?.containerStatuses?.some((s) => s.state?.running || s.state?.terminated) ?? false).toBe(false)
    const events = await waitFor(async () => {
      const list = await c.core.listNamespacedEvent({namespace: other, fieldSelector: 'involvedObject.name=refused'})
      return list.items.find((e) => e.reason === 'NamespaceNotAllowed')
    }, 'the Warning event')
    expect(events.type).toBe('Warning')
    const r = await waitFor(async () => {
      const out = await kubectl(['logs', '-n', allowed, 'admitted'])
      return out.exitCode === 0 && out.stdout.trim() === 'ran' ? out : undefined
    }, 'the allowed pod to run')
    expect(r.stdout.trim()).toBe('ran')
  }, 60_000)

  test('admission-policy: the API server refuses a pod for this node from anyone not named, and the policy goes with the Node', async () => {
    const installed = await vnode(['admission-policy', name, '--allow', 'alice'])
    expect(installed.stderr).toBe('')
    expect(installed.exitCode).toBe(0)
    expect(installed.stdout).toMatch(new RegExp(`^validatingadmissionpolicy/vnode-node-${name}: pods on node ${name} may only be created by alice, kubernetes-admin$`))
    const manifest = (pod: string, spec: Record<string, unknown>) =>
      JSON.stringify({apiVersion: 'v1', kind: 'Pod', metadata: {name: pod, namespace: allowed}, spec: {containers: [{name: 'main', image: 'sh', command: ['/bin/sh', '-c', 'true']}], ...spec}})
    // eve may create pods (system:masters), but not on this node: bound to it, or tolerating its taint.
    // The API server loads a new policy within a second or so: wait on server-side dry runs, which create nothing.
    await waitFor(
      async () => (await kubectl(['create', '--dry-run=server', '--as=eve', '--as-group=system:masters', '-f', '-'], manifest('eve-bound', {nodeName: name}))).exitCode !== 0,
      'the policy to take effect',
      20_000,
      500,
    )
    const denied = await kubectl(['create', '--as=eve', '--as-group=system:masters', '-f', '-'], manifest('eve-bound', {nodeName: name}))
    expect(denied.exitCode).not.toBe(0)
    expect(denied.stderr).toContain(`pods on node ${name} may only be created by alice, kubernetes-admin (kubectl vnode admission-policy); not by eve`)
    const tolerating = await kubectl(
      ['create', '--as=eve', '--as-group=system:masters', '-f', '-'],
      manifest('eve-tolerates', {tolerations: [{key: 'virtual-kubelet.io/provider', operator: 'Exists'}]}),
    )
    expect(tolerating.exitCode).not.toBe(0)
    expect(tolerating.stderr).toContain('not by eve')
    // Elsewhere eve is not concerned; alice may put pods here.
    const elsewhere = await kubectl(['create', '--as=eve', '--as-group=system:masters', '-f', '-'], manifest('eve-elsewhere', {nodeName: 'some-other-node'}))
    expect(elsewhere.exitCode).toBe(0)
    const alice = await kubectl(['create', '--as=alice', '--as-group=system:masters', '-f', '-'], manifest('alice-bound', {nodeName: name, restartPolicy: 'Never'}))
    expect(alice.exitCode).toBe(0)
    // Removed with the Node (its owner): the garbage collector deletes both.
    await c.core.deleteNode({name})
    await waitFor(
      async () => {
        const r = await kubectl(['get', 'validatingadmissionpolicy,validatingadmissionpolicybinding', '-o', 'name', '--ignore-not-found'])
        return r.exitCode === 0 && !r.stdout.includes(`vnode-node-${name}`)
      },
      'the policy and binding to go with the Node',
      30_000,
      500,
    )
  }, 90_000)
})

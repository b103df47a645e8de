import {afterAll, beforeAll, describe, expect, test} from '@jest/globals'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {connect, type PeerCertificate} from 'node:tls'
import {ServingCertAnnotation} from '../../src/common/labels.js'
import {issueCert} from '../../src/common/pki.js'
import {kubeconfigYaml} from '../../src/cluster/cluster-pki.js'
import {
  clients,
  type Clients,
  createNamespace,
  deleteNamespace,
  describeE2e,
  kubeconfigPath,
  kubectl,
  runDir,
  startVnode,
  stopAllVnodes,
  uniqueName,
  vnode,
  type VnodeProcess,
  waitFor,
} from './helpers.js'

/**
 * The kubelet API's serving certificate (`up --serving-cert`, default auto):
 * a kubernetes.io/kubelet-serving CSR the local control plane signs with
 * its cluster CA (the controller-manager's --cluster-signing-cert-file), so
 * a client that verifies kubelet certificates against the cluster CA, as an
 * API server with --kubelet-certificate-authority does, accepts the node's;
 * and a cluster that never issues it (vnode's user may not approve, nobody
 * else does) gets the self-signed one with one line saying so.
 */

const clusterDir = () => dirname(kubeconfigPath())
const clusterCa = () => readFileSync(join(clusterDir(), 'pki', 'ca.crt'))

interface Handshake {
  authorized: boolean
  error?: string
  cert: PeerCertificate
}

/** A TLS handshake with the node's kubelet port, verifying its certificate against ca for the address dialled. */
function handshake(host: string, port: number, ca: Buffer): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const s = connect({host, port, ca, rejectUnauthorized: false, timeout: 10_000})
    s.once('secureConnect', () => {
      const r = {authorized: s.authorized, error: s.authorizationError?.toString(), cert: s.getPeerCertificate()}
      s.destroy()
      resolve(r)
    })
    s.once('timeout', () => s.destroy(new Error('timeout')))
    s.once('error', reject)
  })
}

const endpoint = async (c: Clients, name: string) => {
  const n = await c.core.readNode({name})
  return {ip: n.status!.addresses!.find((a) => a.type === 'InternalIP')!.address, port: n.status!.daemonEndpoints!.kubeletEndpoint!.Port}
}

/** The node's vnode.dev/serving-cert annotation once it matches: which certificate it says it serves. */
async function servingAnnotation(c: Clients, node: string, want: RegExp): Promise<string> {
  let last: string | undefined
  return waitFor(
    async () => {
      last = (await c.core.readNode({name: node})).metadata?.annotations?.[ServingCertAnnotation]
      return last !== undefined && want.test(last) ? last : undefined
    },
    () => `node ${node}'s ${ServingCertAnnotation} to match ${want} (last: ${last})`,
    30_000,
    250,
  )
}

describeE2e('the serving certificate: a kubelet-serving CSR the cluster signs, or self-signed with a line', () => {
  let c: Clients
  const ns = uniqueName('serving')
  const tmp: string[] = []
  const nodes: string[] = []
  beforeAll(async () => {
    c = await clients()
    await createNamespace(c.core, ns)
  })
  afterAll(async () => {
    await stopAllVnodes()
    await deleteNamespace(c?.core, ns)
    for (const d of tmp) rmSync(d, {recursive: true, force: true})
    for (const n of nodes) await c?.core.deleteNode({name: n}).catch(() => undefined)
  }, 60_000)

  test('default (auto): signed by the cluster CA for the node address, the CSR approved and deleted, and kubectl logs works', async () => {
    const name = uniqueName('signed')
    nodes.push(name)
    const node = startVnode(name)
    await node.ready()
    // Asked in the background (the self-signed one is served until it is issued).
    const line = (await node.waitForLine((l) => l.step === 'cert', 'the serving certificate line')).message
    expect(line).toMatch(/^serving certificate: issued by the cluster \(CSR vnode-serving-\w+, signer kubernetes\.io\/kubelet-serving\) for /)
    const {ip, port} = await endpoint(c, name)
    expect(line).toContain(ip)
    const h = await waitFor(async () => {
      const r = await handshake(ip, port, clusterCa())
      return r.authorized ? r : undefined
    }, 'the cluster-signed certificate served')
    expect(h).toMatchObject({authorized: true, error: undefined})
    expect(h.cert.issuer.CN).toBe('vnode-cluster-ca')
    expect(h.cert.subject).toMatchObject({CN: `system:node:${name}`, O: 'system:nodes'})
    expect(h.cert.subjectaltname).toContain(`IP Address:${ip}`)
    // The Node says so, for doctor.
    await servingAnnotation(c, name, /^cluster$/)
    // No CSR of this node is left behind.
    const csrs = await kubectl(['get', 'csr', '-o', 'jsonpath={range .items[*]}{.metadata.annotations.vnode\\.dev/node}{"\\n"}{end}'])
    expect(csrs.exitCode).toBe(0)
    expect(csrs.stdout.split('\n')).not.toContain(name)
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {name: 'hello'},
        spec: {nodeName: name, restartPolicy: 'Never', containers: [{name: 'hello', image: 'vnode/node', command: ['echo', 'served over a cluster-signed certificate']}]},
      },
    })
    await waitFor(async () => (await c.core.readNamespacedPod({name: 'hello', namespace: ns})).status?.phase === 'Succeeded', 'hello done', 30_000)
    expect(await kubectl(['-n', ns, 'logs', 'hello'])).toMatchObject({exitCode: 0, stdout: 'served over a cluster-signed certificate'})
    // Kept across a restart: no new CSR.
    expect(await node.stop()).toBe(0)
    const again = startVnode(name)
    await again.ready()
    expect(again.lines.some((l) => l.step === 'cert')).toBe(false)
    const h2 = await handshake(ip, (await endpoint(c, name)).port, clusterCa())
    expect(h2.authorized).toBe(true)
    expect(h2.cert.fingerprint256).toBe(h.cert.fingerprint256)
  }, 90_000)

  test('--serving-cert self-signed: no CSR, the node-local CA', async () => {
    const name = uniqueName('selfsigned')
    nodes.push(name)
    const node = startVnode(name, ['--serving-cert', 'self-signed'])
    await node.ready()
    expect(node.lines.some((l) => l.step === 'cert')).toBe(false)
    const {ip, port} = await endpoint(c, name)
    const h = await handshake(ip, port, clusterCa())
    expect(h.authorized).toBe(false)
    expect(h.cert.issuer.CN).toBe(`vnode-${name}-ca`)
  })

  describe('a cluster that never issues it', () => {
    const user = uniqueName('no-approve')
    let node: VnodeProcess
    beforeAll(async () => {
      // A user with what a node needs, and CSRs and their approval subresource, but not `approve` on the signer:
      // the approval is forbidden, and no controller approves kubelet-serving CSRs.
      const rules = [
        {apiGroups: ['', 'coordination.k8s.io', 'authentication.k8s.io', 'authorization.k8s.io', 'events.k8s.io', 'storage.k8s.io', 'discovery.k8s.io', 'apps'], resources: ['*'], verbs: ['*']},
        {apiGroups: ['certificates.k8s.io'], resources: ['certificatesigningrequests', 'certificatesigningrequests/approval', 'certificatesigningrequests/status'], verbs: ['*']},
      ]
      const r = await kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          items: [
            {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: user}, rules},
            {
              apiVersion: 'rbac.authorization.k8s.io/v1',
              kind: 'ClusterRoleBinding',
              metadata: {name: user},
              roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user},
              subjects: [{apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user}],
            },
          ],
        }),
      )
      if (r.exitCode !== 0) throw new Error(r.stderr)
    })
    afterAll(async () => {
      await kubectl(['delete', 'clusterrolebinding,clusterrole', user, '--ignore-not-found'])
    })

    test('auto falls back to self-signed with one line naming kubectl logs --insecure-skip-tls-verify-backend; kubectl logs still works here', async () => {
      const dir = mkdtempSync(join(runDir(), 'no-approve-'))
      tmp.push(dir)
      const pair = await issueCert(join(dir, 'pki'), {cert: join(clusterDir(), 'pki', 'ca.crt'), key: join(clusterDir(), 'pki', 'ca.key')}, {name: user, commonName: user, usage: 'client'})
      const server = c.kc.getCurrentCluster()!.server
      const kubeconfig = join(dir, 'kubeconfig')
      writeFileSync(kubeconfig, kubeconfigYaml(server, join(clusterDir(), 'pki', 'ca.crt'), pair, user), {mode: 0o600})
      const name = uniqueName('unsigned')
      nodes.push(name)
      node = startVnode(name, ['--kubeconfig', kubeconfig, '--allowed-namespaces', ns])
      await node.ready(60_000)
      // The node is Ready at once, on the self-signed certificate; the line comes when the wait is over.
      await node.waitForLine((l) => l.step === 'cert' && l.message.startsWith('serving certificate: self-signed'), 'the fallback line')
      const lines = node.lines.filter((l) => l.step === 'cert').map((l) => l.message)
      expect(lines).toEqual([
        expect.stringMatching(
          /^serving certificate: waiting for CSR vnode-serving-\w+ to be approved and issued: vnode's user cannot approve it \(forbidden: .*\); `kubectl certificate approve vnode-serving-\w+` approves it$/,
        ),
        expect.stringMatching(
          /^serving certificate: self-signed: CSR vnode-serving-\w+ not approved: .* within 5 s \(signer kubernetes\.io\/kubelet-serving\); an API server that verifies kubelet certificates refuses it, and only kubectl logs --insecure-skip-tls-verify-backend gets through$/,
        ),
      ])
      const {ip, port} = await endpoint(c, name)
      const h = await handshake(ip, port, clusterCa())
      expect(h.authorized).toBe(false)
      expect(h.cert.issuer.CN).toBe(`vnode-${name}-ca`)
      // The Node says which and why, for doctor (a verifying API server's row then names kubectl certificate approve).
      await servingAnnotation(c, name, /^self-signed: CSR vnode-serving-\w+ not approved: /)
      // The CSR it gave up on is gone.
      const csrs = await kubectl(['get', 'csr', '-o', 'jsonpath={range .items[*]}{.metadata.annotations.vnode\\.dev/node}{"\\n"}{end}'])
      expect(csrs.stdout.split('\n')).not.toContain(name)
      await c.core.createNamespacedPod({
        namespace: ns,
        body: {metadata: {name: 'unsigned'}, spec: {nodeName: name, restartPolicy: 'Never', containers: [{name: 'unsigned', image: 'vnode/node', command: ['echo', 'self-signed']}]}},
      })
      await waitFor(async () => (await c.core.readNamespacedPod({name: 'unsigned', namespace: ns})).status?.phase === 'Succeeded', 'unsigned done', 30_000)
      // This API server does not verify kubelet certificates: logs come through as before.
      expect(await kubectl(['-n', ns, 'logs', 'unsigned'])).toMatchObject({exitCode: 0, stdout: 'self-signed'})
    }, 90_000)
  })
})

/**
 * On a control plane of this describe's own whose API server verifies
 * kubelet certificates against its cluster CA (--kubelet-certificate-authority):
 * the node's cluster-signed certificate passes, a self-signed one does not,
 * and `kubectl logs --insecure-skip-tls-verify-backend` is then the way through.
 */
describeE2e('an API server that verifies kubelet certificates', () => {
  const dir = join(runDir(), 'verifying-cluster')
  const kubeconfig = join(dir, 'kubeconfig')
  const ns = uniqueName('verify')
  const kc = (...args: string[]) => kubectl(['--kubeconfig', kubeconfig, ...args])

  beforeAll(async () => {
    const up = await vnode(['cluster', 'up', '--dir', dir, '--port', '0', '--no-services', '--loopback', `--apiserver-arg=--kubelet-certificate-authority=${join(dir, 'pki', 'ca.crt')}`], {
      timeout: 120_000,
    })
    if (up.exitCode !== 0) throw new Error(`cluster up exited ${up.exitCode}: ${up.stderr}`)
    expect((await kc('create', 'namespace', ns)).exitCode).toBe(0)
  }, 150_000)
  afterAll(async () => {
    await stopAllVnodes()
    await vnode(['cluster', 'down', '--dir', dir], {timeout: 60_000})
  }, 90_000)

  const runPod = async (node: string, pod: string) => {
    const spec = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {name: pod, namespace: ns},
      spec: {nodeName: node, restartPolicy: 'Never', containers: [{name: pod, image: 'vnode/node', command: ['echo', `hello from ${pod}`]}]},
    }
    expect((await kubectl(['--kubeconfig', kubeconfig, 'apply', '-f', '-'], JSON.stringify(spec))).exitCode).toBe(0)
    await waitFor(async () => (await kc('-n', ns, 'get', 'pod', pod, '-o', 'jsonpath={.status.phase}')).stdout === 'Succeeded', `${pod} done`, 30_000)
  }

  test('the cluster-signed certificate (default auto): kubectl logs works', async () => {
    const node = uniqueName('verified')
    const p = startVnode(node, ['--kubeconfig', kubeconfig])
    await p.ready()
    expect((await p.waitForLine((l) => l.step === 'cert', 'the serving certificate line')).message).toMatch(/^serving certificate: issued by the cluster/)
    // up's reach check went through the verifying API server too.
    expect(p.lines.find((l) => l.step === 'relay')?.message).toMatch(/^kubelet endpoint: direct at \S+: the API server reaches it \(the kubelet API answered 200\)$/)
    await runPod(node, 'signed')
    expect(await kc('-n', ns, 'logs', 'signed')).toMatchObject({exitCode: 0, stdout: 'hello from signed'})
  }, 60_000)

  test('a self-signed certificate: kubectl logs is refused by the API server; --insecure-skip-tls-verify-backend gets through', async () => {
    const node = uniqueName('unverified')
    const p = startVnode(node, ['--kubeconfig', kubeconfig, '--serving-cert', 'self-signed'])
    await p.ready()
    // A relay would carry the same TLS: up stays direct and says why.
    expect(p.lines.find((l) => l.step === 'relay')?.message).toMatch(
      /^kubelet endpoint: direct at \S+: the API server reaches it but refuses its serving certificate \(.*x509: .*\); a relay carries the same TLS, so it stays direct: .*kubectl logs --insecure-skip-tls-verify-backend$/,
    )
    await runPod(node, 'selfsigned')
    const refused = await kc('-n', ns, 'logs', 'selfsigned')
    expect(refused.exitCode).not.toBe(0)
    expect(refused.stderr).toMatch(/x509: certificate signed by unknown authority|tls: failed to verify certificate/)
    expect(await kc('-n', ns, 'logs', '--insecure-skip-tls-verify-backend', 'selfsigned')).toMatchObject({exitCode: 0, stdout: 'hello from selfsigned'})
  }, 60_000)
})

import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {createCa, issueCert} from '../../src/common/pki.js'
import {type Clients, clients, describeE2e, startVnode, stopAllVnodes, uniqueName, vnode} from './helpers.js'
import {direct} from './server-helpers.js'

describeE2e('kubelet API flags of vnode up', () => {
  let c: Clients
  let dir: string
  let other: {cert: Buffer; key: Buffer}
  let otherCa: string
  let admin: {cert: Buffer; key: Buffer}

  beforeAll(async () => {
    c = await clients()
    const user = c.kc.getCurrentUser()!
    admin = {cert: Buffer.from(user.certData!, 'base64'), key: Buffer.from(user.keyData!, 'base64')}
    dir = mkdtempSync(join(tmpdir(), 'vnode-clientca-'))
    const ca = await createCa(dir, 'another-ca')
    const client = await issueCert(dir, ca, {name: 'someone', commonName: 'someone', usage: 'client'})
    other = {cert: readFileSync(client.cert), key: readFileSync(client.key)}
    otherCa = ca.cert
  })

  afterAll(async () => {
    await stopAllVnodes()
    rmSync(dir, {recursive: true, force: true})
  })

  async function kubeletPort(name: string): Promise<number> {
    return (await c.core.readNode({name})).status!.daemonEndpoints!.kubeletEndpoint!.Port
  }

  test('by default anonymous requests get 401, the cluster CA authenticates client certificates, and the serving certificate survives a restart', async () => {
    const name = uniqueName('kflags')
    const p = startVnode(name, ['--rm'])
    await p.ready()
    const port = await kubeletPort(name)
    expect(await direct(port, '/healthz')).toMatchObject({status: 401, body: 'Unauthorized'})
    expect(await direct(port, '/healthz', admin)).toMatchObject({status: 200, body: 'ok'})
    expect((await direct(port, '/healthz', other)).status).toBe(401)
    const served = (await direct(port, '/healthz', admin)).peer
    expect(served.subject.CN).toBe(`system:node:${name}`)
    expect(await p.stop()).toBe(0)
    // Restarted on the same state dir, the node serves the same certificate.
    const again = startVnode(name, ['--rm'])
    await again.ready()
    expect((await direct(await kubeletPort(name), '/healthz', admin)).peer.fingerprint256).toBe(served.fingerprint256)
    expect(await again.stop()).toBe(0)
  })

  test('--anonymous-auth --authorization-mode AlwaysAllow --client-ca-file serve anonymous requests and trust only that CA', async () => {
    const name = uniqueName('kflags')
    const p = startVnode(name, ['--rm', '--anonymous-auth', '--authorization-mode', 'AlwaysAllow', '--client-ca-file', otherCa])
    await p.ready()
    const port = await kubeletPort(name)
    expect(await direct(port, '/healthz')).toMatchObject({status: 200, body: 'ok'})
    expect(JSON.parse((await direct(port, '/pods')).body)).toMatchObject({kind: 'PodList', items: []})
    expect((await direct(port, '/healthz', other)).status).toBe(200)
    // A certificate the configured CA did not sign is refused, even with anonymous requests allowed.
    expect((await direct(port, '/healthz', admin)).status).toBe(401)
    expect(await p.stop()).toBe(0)
  })

  test('bad flag values are clear errors', async () => {
    const mode = await vnode(['up', '--name', uniqueName('kflags'), '--authorization-mode', 'Sometimes'])
    expect(mode.exitCode).not.toBe(0)
    expect(mode.stderr).toMatch(/Expected --authorization-mode=Sometimes to be one of: Webhook, AlwaysAllow/)
    const name = uniqueName('kflags')
    const ca = await vnode(['up', '--name', name, '--port', '0', '--rm', '--no-tui', '--client-ca-file', join(dir, 'missing.crt')])
    expect(ca.exitCode).toBe(1)
    expect(ca.stderr).toContain(`error: cannot read --client-ca-file ${join(dir, 'missing.crt')}`)
    // The failed start removed the node it had registered (--rm).
    await expect(c.core.readNode({name})).rejects.toMatchObject({code: 404})
  })
})

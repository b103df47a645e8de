import {afterAll, beforeAll, expect} from '@jest/globals'
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {bridgeName} from '../../src/emulator/runtime/network/config.js'
import {DefaultCniPath} from '../../src/emulator/runtime/network/cni.js'
import {netnsExists} from '../../src/emulator/runtime/network/netns.js'
import {PodNetwork} from '../../src/emulator/runtime/network/pod-network.js'
import {describeE2e, runDir, testWhen, uniqueName, waitFor} from './helpers.js'

const Plugins = ['bridge', 'host-local', 'loopback', 'portmap']
const canRun = process.getuid?.() === 0 && Plugins.every((p) => existsSync(join(DefaultCniPath, p)))

/** A /24 of 10.89.0.0/16 that no route of this host covers yet: the test's bridge takes it, and gives it back. */
function freeCidr(): string {
  const routes = execFileSync('ip', ['-4', 'route', 'show'], {encoding: 'utf8'})
  for (let i = 200; i < 256; i++) if (!routes.includes(`10.89.${i}.`)) return `10.89.${i}.0/24`
  throw new Error('no free /24 in 10.89.0.0/16 for the test bridge')
}

/**
 * A pod's network goes with one plugin program: its port mappings' (none
 * here), then its namespace in a batched `ip` (its veth pair goes with it),
 * then its address through host-local, given the bridge's conf as the
 * bridge plugin gives it. The bridge plugin itself is not run on the way out. Each
 * plugin is the real one behind a wrapper that logs its name and command.
 */
describeE2e('pod network teardown: the veth pair, the namespace and the address, without the bridge plugin', () => {
  const dir = join(runDir(), uniqueName('net-teardown'))
  const cniPath = join(dir, 'cni')
  const log = join(dir, 'plugins.log')
  const slowDel = join(dir, 'slow-del')
  const recordPath = (uid: string) => join(dir, 'state', 'network', 'pods', `${uid}.json`)
  const nodeName = uniqueName('teardown')
  const bridge = bridgeName(nodeName)
  const bridges = [bridge]
  const made: string[] = []
  let net: PodNetwork | undefined

  const calls = (): string[] => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) : [])
  const clearLog = () => writeFileSync(log, '')
  const links = (): string[] => readdirSync('/sys/class/net')
  const record = (uid: string) =>
    JSON.parse(readFileSync(join(dir, 'state', 'network', 'pods', `${uid}.json`), 'utf8')) as {netns: string; ip: string; result: {interfaces: Array<{name: string; sandbox?: string}>}}
  const leases = (): string[] => {
    const d = join(dir, 'state', 'network', 'ipam')
    return existsSync(d) ? readdirSync(d).flatMap((n) => readdirSync(join(d, n)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f))) : []
  }

  beforeAll(() => {
    if (!canRun) return
    mkdirSync(cniPath, {recursive: true})
    for (const p of Plugins) {
      const wrapper = join(cniPath, p)
      // A DEL waits half a second while the test's slow-del file exists.
      writeFileSync(
        wrapper,
        `#!/bin/sh\necho "${p} $CNI_COMMAND" >> ${JSON.stringify(log)}\nif [ "$CNI_COMMAND" = DEL ] && [ -e ${JSON.stringify(slowDel)} ]; then sleep 0.5; fi\nexec ${JSON.stringify(join(DefaultCniPath, p))} "$@"\n`,
      )
      chmodSync(wrapper, 0o755)
    }
  })

  afterAll(async () => {
    await net?.close().catch(() => undefined)
    // Whatever a failed assertion left, by its own name: the namespaces this test made, then its bridge.
    for (const n of made) if (netnsExists(n)) execFileSync('ip', ['netns', 'del', n])
    for (const b of bridges) if (existsSync(join('/sys/class/net', b))) execFileSync('ip', ['link', 'del', b])
  })

  testWhen(canRun, 'it needs root and the CNI plugins (containernetworking-plugins)')(
    "three pods' networks go with host-local's DEL alone: no veth, namespace or lease is left, and the next pod gets an address",
    async () => {
      net = new PodNetwork({nodeName, podCidr: freeCidr(), stateDir: join(dir, 'state'), routes: [], cniPath, pool: {cap: 0}})
      const uids = ['a', 'b', 'c'].map((s) => `${s}-${process.pid}`)
      const attached = await Promise.all(uids.map((uid) => net!.attach({uid, namespace: 'default', name: uid, portMappings: []})))
      const names = uids.map((uid) => record(uid).netns.split('/').pop()!)
      made.push(...names)
      const veths = uids.map((uid) => record(uid).result.interfaces.find((i) => !i.sandbox && i.name !== bridge)!.name)
      expect(veths.every((v) => links().includes(v))).toBe(true)
      expect(leases().sort()).toEqual(attached.map((a) => a.ip).sort())
      clearLog()

      // detach returns once the namespaces are gone; the addresses follow, each record kept until its address is back.
      writeFileSync(slowDel, '')
      await Promise.all(uids.map((uid) => net!.detach(uid)))
      expect(names.filter(netnsExists)).toEqual([])
      expect(net.addressesReturning).toBe(3)
      expect(uids.filter((uid) => existsSync(recordPath(uid)))).toEqual(uids)
      rmSync(slowDel)
      await net.addressesReturned()
      expect(net.addressesReturning).toBe(0)
      expect(uids.filter((uid) => existsSync(recordPath(uid)))).toEqual([])
      expect(calls()).toEqual(['host-local DEL', 'host-local DEL', 'host-local DEL'])
      // The pairs go with their namespaces, once the kernel's cleanup of them runs.
      await waitFor(
        () => links().filter((l) => veths.includes(l)).length === 0,
        () =>
          `veths gone (left: ${links()
            .filter((l) => veths.includes(l))
            .join(' ')})`,
        15_000,
        50,
      )
      expect(leases()).toEqual([])

      const next = await net.attach({uid: `d-${process.pid}`, namespace: 'default', name: 'd', portMappings: []})
      made.push(record(`d-${process.pid}`).netns.split('/').pop()!)
      expect(leases()).toEqual([next.ip])

      // The same UID attached again while its address is still being given back: the new attachment keeps its record and address.
      writeFileSync(slowDel, '')
      await net.detach(`d-${process.pid}`)
      const again = await net.attach({uid: `d-${process.pid}`, namespace: 'default', name: 'd', portMappings: []})
      rmSync(slowDel)
      made.push(record(`d-${process.pid}`).netns.split('/').pop()!)
      await net.addressesReturned()
      expect(record(`d-${process.pid}`).ip).toBe(again.ip)
      expect(leases()).toEqual([again.ip])
      await net.detach(`d-${process.pid}`)
      // close() waits for the address being given back.
      await net.close()
      expect(links()).not.toContain(bridge)
      expect(existsSync(join(dir, 'state', 'network'))).toBe(false)
    },
  )

  testWhen(canRun, 'it needs root and the CNI plugins (containernetworking-plugins)')(
    "a node started again removes the attachments of pods no runtime took over (a stop while their addresses were being given back), and keeps the others'",
    async () => {
      const orphanNode = uniqueName('teardown-orphan')
      bridges.push(bridgeName(orphanNode))
      const stateDir = join(dir, 'orphan-state')
      const cidr = freeCidr()
      const first = new PodNetwork({nodeName: orphanNode, podCidr: cidr, stateDir, routes: [], cniPath, pool: {cap: 0}})
      const [gone, kept] = ['gone', 'kept'].map((s) => `${s}-${process.pid}`)
      const ips = await Promise.all([gone, kept].map(async (uid) => (await first.attach({uid, namespace: 'default', name: uid, portMappings: []})).ip))
      const netnsOf = (uid: string) => (JSON.parse(readFileSync(join(stateDir, 'network', 'pods', `${uid}.json`), 'utf8')) as {netns: string}).netns.split('/').pop()!
      const names = [gone, kept].map(netnsOf)
      made.push(...names)
      const orphanLeases = () => readdirSync(join(stateDir, 'network', 'ipam')).flatMap((n) => readdirSync(join(stateDir, 'network', 'ipam', n)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)))

      // The node started again: only `kept` was adopted.
      const second = new PodNetwork({nodeName: orphanNode, podCidr: cidr, stateDir, routes: [], cniPath, pool: {cap: 0}})
      await second.start(new Set([kept]))
      expect(names.map(netnsExists)).toEqual([false, true])
      expect(orphanLeases()).toEqual([ips[1]])
      expect(existsSync(join(stateDir, 'network', 'pods', `${gone}.json`))).toBe(false)
      expect(await second.attached(kept)).toEqual({ip: ips[1], netns: join('/run/netns', names[1])})

      await second.detach(kept)
      await second.close()
      expect(names.filter(netnsExists)).toEqual([])
      expect(existsSync(join(stateDir, 'network'))).toBe(false)
    },
  )

  testWhen(canRun, 'it needs root and the CNI plugins (containernetworking-plugins)')('a stopping node destroys its warm entries the same way, and returns once their veths are gone', async () => {
    const poolNode = uniqueName('teardown-pool')
    const veths: string[] = []
    bridges.push(bridgeName(poolNode))
    const pooled = new PodNetwork({nodeName: poolNode, podCidr: freeCidr(), stateDir: join(dir, 'pool-state'), routes: [], cniPath, pool: {cap: 2, floor: 2}})
    let holder: ChildProcess | undefined
    let stopMs: number | undefined
    try {
      await pooled.start(new Set())
      await waitFor(() => pooled.poolFigures()?.ready === 2, 'two warm entries', 30_000, 50)
      const entries = readdirSync(join(dir, 'pool-state', 'network', 'pool')).map(
        (f) => JSON.parse(readFileSync(join(dir, 'pool-state', 'network', 'pool', f), 'utf8')) as {netns: string; result: {interfaces: Array<{name: string; sandbox?: string}>}},
      )
      made.push(...entries.map((e) => e.netns.split('/').pop()!))
      veths.push(...entries.map((e) => e.result.interfaces.find((i) => !i.sandbox && i.name !== bridgeName(poolNode))!.name))
      expect(veths.every((v) => links().includes(v))).toBe(true)
      // A process left in one entry's namespace keeps it, and its veth, after `ip netns del`, as a kernel's
      // slow cleanup would: the stop waits until that veth is gone.
      holder = spawn('nsenter', [`--net=${entries[0].netns}`, 'sleep', '30'], {stdio: 'ignore'})
      const netnsInode = statSync(entries[0].netns).ino
      await waitFor(() => readlinkSync(`/proc/${holder!.pid}/ns/net`) === `net:[${netnsInode}]`, 'the holder in the namespace', 10_000, 20)
      const kill = setTimeout(() => holder!.kill('SIGKILL'), 1000)
      clearLog()
      const t0 = Date.now()
      await pooled.close()
      stopMs = Date.now() - t0
      clearTimeout(kill)
    } finally {
      holder?.kill('SIGKILL')
      await pooled.close()
    }
    expect(calls()).toEqual(['host-local DEL', 'host-local DEL'])
    expect(stopMs ?? 0).toBeGreaterThanOrEqual(900)
    expect(links().filter((l) => veths.includes(l))).toEqual([])
    expect(made.filter(netnsExists)).toEqual([])
    expect(links()).not.toContain(bridgeName(poolNode))
    expect(existsSync(join(dir, 'pool-state', 'network'))).toBe(false)
  })
})

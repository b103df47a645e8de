import {describe, expect, test} from '@jest/globals'
import {tempDir} from './temp-dirs.js'
import type {V1Pod} from '@kubernetes/client-node'
import {mkdirSync, symlinkSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {Worker} from 'node:worker_threads'
import {bwrapArgs, MountPointError, shadowDirs, viewPath} from '../../src/emulator/runtime/sandbox/bwrap.js'
import {containerHostname, hostsFile, resolvConf} from '../../src/emulator/runtime/sandbox/pod-files.js'
import {hostPathOf} from '../../src/emulator/runtime/sandbox/spec.js'
import {reachableMaster} from '../../src/emulator/runtime/env/env.js'

const pod = (spec: Partial<NonNullable<V1Pod['spec']>> = {}, name = 'web-7f9c'): V1Pod => ({metadata: {name, namespace: 'shop'}, spec: {containers: [], ...spec}})

describe('pod files as the kubelet writes them', () => {
  test('/etc/hosts: the pod IP with hostname and FQDN for a subdomain, then hostAliases', () => {
    const text = hostsFile(pod({hostname: 'db-0', subdomain: 'db', hostAliases: [{ip: '10.0.0.9', hostnames: ['a.local', 'b.local']}]}), ['192.0.2.2'])
    expect(text.split('\n')).toEqual([
      '# Kubernetes-managed hosts file.',
      '127.0.0.1\tlocalhost',
      '::1\tlocalhost ip6-localhost ip6-loopback',
      'fe00::0\tip6-localnet',
      'fe00::0\tip6-mcastprefix',
      'fe00::1\tip6-allnodes',
      'fe00::2\tip6-allrouters',
      '192.0.2.2\tdb-0.db.shop.svc.cluster.local\tdb-0',
      '',
      '# Entries added by HostAliases.',
      '10.0.0.9\ta.local\tb.local',
      '',
    ])
  })

  test('hostNetwork pods get the host file under the kubelet header', () => {
    expect(hostsFile(pod({hostNetwork: true}), ['192.0.2.2'], 'cluster.local', () => '127.0.0.1 localhost\n10.1.1.1 box\n')).toBe(
      '# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n10.1.1.1 box\n',
    )
  })

  test('hostname: spec.hostname, else the pod name cut to 63 without a trailing dash; the FQDN with setHostnameAsFQDN', () => {
    expect(containerHostname(pod())).toBe('web-7f9c')
    expect(containerHostname(pod({}, `${'a'.repeat(62)}-bcd`))).toBe('a'.repeat(62))
    expect(containerHostname(pod({hostname: 'h', subdomain: 's', setHostnameAsFQDN: true}))).toBe('h.s.shop.svc.cluster.local')
  })

  test('resolv.conf per dnsPolicy: the host file without cluster DNS, cluster search paths with it, None from dnsConfig alone', () => {
    const host = () => 'nameserver 192.0.2.53\nsearch corp.example\noptions edns0\n'
    const noDns = {clusterDNS: [], clusterDomain: 'cluster.local'}
    expect(resolvConf(pod(), noDns, host)).toBe('search corp.example\nnameserver 192.0.2.53\noptions edns0\n')
    expect(resolvConf(pod(), {clusterDNS: ['10.96.0.10'], clusterDomain: 'cluster.local'}, host)).toBe(
      'search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n',
    )
    expect(resolvConf(pod({dnsPolicy: 'None', dnsConfig: {nameservers: ['1.2.3.4'], searches: ['x.local'], options: [{name: 'ndots', value: '2'}]}}), noDns, host)).toBe(
      'search x.local\nnameserver 1.2.3.4\noptions ndots:2\n',
    )
  })
})

describe('the container view', () => {
  test('a mount point missing on the host shadows the directory that would receive it; one that exists is bound over', () => {
    const root = tempDir('vnode-view-')
    mkdirSync(join(root, 'etc'))
    writeFileSync(join(root, 'etc', 'hosts'), '')
    mkdirSync(join(root, 'data'))
    const app = join(root, 'etc', 'app')
    const hosts = join(root, 'etc', 'hosts')
    expect(shadowDirs([app, hosts], [])).toEqual([join(root, 'etc')])
    // A target inside another target's volume gets its mount point there, as a runtime makes it.
    expect(shadowDirs([join(root, 'data', 'x'), join(root, 'data', 'x', 'y')], [])).toEqual([join(root, 'data')])
    // Inside a hidden directory (a tmpfs of the view) nothing is shadowed.
    expect(shadowDirs([join(root, 'data', 'x')], [join(root, 'data')])).toEqual([])
  })

  test('targets resolve through host symlinks; /proc and /sys are refused; a file in the way is refused', () => {
    const root = tempDir('vnode-view-')
    mkdirSync(join(root, 'run'))
    symlinkSync(join(root, 'run'), join(root, 'varrun'))
    writeFileSync(join(root, 'file'), '')
    expect(viewPath(join(root, 'varrun', 'secrets', 'token'), [])).toBe(join(root, 'run', 'secrets', 'token'))
    expect(() => viewPath('/proc/x', [])).toThrow(MountPointError)
    expect(() => viewPath('/sys/kernel/x', [])).toThrow(/kernel filesystem/)
    expect(() => viewPath(join(root, 'file', 'x'), [])).toThrow(/is not a directory/)
    // A dangling link is refused, not taken for a path that is not there.
    symlinkSync(join(root, 'nowhere'), join(root, 'dangling'))
    expect(() => viewPath(join(root, 'dangling', 'x'), [])).toThrow(/cannot be resolved/)
  })

  test('a link that comes and goes while a target is resolved: resolved again from what is there, never refused; one into a hidden path is never followed', async () => {
    const root = tempDir('vnode-view-race-')
    const inner = join(root, 'elsewhere', 'inner')
    mkdirSync(inner, {recursive: true})
    const link = join(root, 'link')
    // Another thread makes and removes the link as fast as it can, as another node's pod start and delete do.
    const stop = new Int32Array(new SharedArrayBuffer(4))
    const worker = new Worker(
      `const {symlinkSync, unlinkSync} = require('node:fs'); const {workerData: w} = require('node:worker_threads');
       while (Atomics.load(w.stop, 0) === 0) { try { symlinkSync(w.inner, w.link); unlinkSync(w.link) } catch {} }`,
      {eval: true, workerData: {stop, inner, link}},
    )
    const seen = new Map<string, number>()
    const seenHidden = new Map<string, number>()
    try {
      const target = join(link, 'sub')
      for (let i = 0; i < 20_000; i++) {
        const r = viewPath(target, [])
        seen.set(r, (seen.get(r) ?? 0) + 1)
        const h = viewPath(target, [join(root, 'elsewhere')])
        seenHidden.set(h, (seenHidden.get(h) ?? 0) + 1)
      }
    } finally {
      Atomics.store(stop, 0, 1)
      await worker.terminate()
    }
    // Both states were met (the race ran), and each resolution is one of them.
    expect([...seen.keys()].sort()).toEqual([join(inner, 'sub'), join(link, 'sub')].sort())
    // Into a hidden path: the mount point is the target itself, link or not.
    expect([...seenHidden.keys()]).toEqual([join(link, 'sub')])
  })

  test('bwrap args: host entries, shadows before hidden dirs, binds shallowest first, PID 1 or a joined PID namespace', () => {
    const args = bwrapArgs(
      {
        hostname: 'h',
        binds: [
          {source: '/srv/v/sub', target: '/opt/x/deep', readOnly: true},
          {source: '/srv/v', target: '/opt/x', readOnly: false},
        ],
        hide: [],
      },
      {cwd: '/', block: true},
    )
    const at = (flag: string, value: string) => args.findIndex((a, i) => a === flag && args[i + 2] === value)
    expect(at('--bind', '/opt/x')).toBeLessThan(at('--ro-bind', '/opt/x/deep'))
    expect(args).toEqual(expect.arrayContaining(['--unshare-pid', '--as-pid-1', '--unshare-uts', '--hostname', 'h', '--block-fd']))
    const joined = bwrapArgs({hostname: 'h', binds: [], hide: [], pidNamespaceOf: 42}, {cwd: '/', block: false})
    expect(joined).toContain('--pidns')
    expect(joined).not.toContain('--as-pid-1')
    expect(joined).not.toContain('--block-fd')
  })

  test('hostPathOf maps a path of the view to the host through the deepest bind; /proc and /dev have none', () => {
    const spec = {
      hostname: 'h',
      hide: [],
      binds: [
        {source: '/v/a', target: '/etc/app', readOnly: true},
        {source: '/v/b', target: '/etc/app/conf', readOnly: true},
      ],
    }
    expect(hostPathOf(spec, '/etc/app/conf/x.yaml')).toBe('/v/b/x.yaml')
    expect(hostPathOf(spec, '/etc/app/y')).toBe('/v/a/y')
    expect(hostPathOf(spec, '/usr/bin/env')).toBe('/usr/bin/env')
    expect(hostPathOf(spec, '/proc/self')).toBeUndefined()
  })
})

test('in-cluster config: the kubernetes Service as this host reaches the API server', () => {
  const m = reachableMaster({metadata: {name: 'kubernetes', namespace: 'default'}, spec: {clusterIP: '10.0.0.1', ports: [{name: 'https', port: 443}]}}, 'https://127.0.0.1:6443')
  expect(m.spec).toEqual({clusterIP: '127.0.0.1', ports: [{name: 'https', port: 6443, protocol: 'TCP'}]})
  expect(reachableMaster({spec: {}}, 'https://[::1]:8443').spec?.clusterIP).toBe('::1')
})

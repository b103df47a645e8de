import {describe, expect, test} from '@jest/globals'
import {type ClusterFacts, diagnose, type DoctorRequest, type HostFacts, installCommands, osFamily, osName} from '../../src/cli/doctor.js'
import {doctorText, fixLines} from '../../src/ui/doctor-output.js'

const Walls = ['mount', 'pid', 'ipc', 'uts', 'no-new-privs', 'proc-masks', 'users', 'capabilities', 'read-only-root', 'writable-layer', 'hidden-paths']

/** Everything there, as root on a Debian host. */
const full: HostFacts = {
  os: 'Debian GNU/Linux 12 (bookworm)',
  family: 'debian',
  uid: 0,
  sandbox: {mode: 'namespaces'},
  programs: {bwrap: true, nsenter: true, iptables: true},
  walls: Walls,
  identity: true,
  layer: {ok: true, how: 'a writable layer per container'},
  cgroups: {mode: 'v1'},
  cgroupV2: false,
  podNetwork: {enabled: true},
  cniPath: '/usr/lib/cni',
  cniMissing: [],
  port: {port: 10250, free: true},
}
const auto: DoctorRequest = {sandbox: 'auto', cgroups: 'auto', podNetwork: 'auto', relay: 'auto'}
const remote: ClusterFacts = {
  server: 'https://10.1.2.3:6443',
  reachable: true,
  version: 'v1.34.4',
  loopback: false,
  dns: {ip: '10.96.0.10', routedHere: false},
  metrics: {available: false, why: 'no metrics API'},
  relay: {namespace: 'vnode-system', denied: [], schedulable: 3},
  nodes: [],
}
const local: ClusterFacts = {
  ...remote,
  server: 'https://127.0.0.1:6443',
  loopback: true,
  podNetworkAutoOff: 'the API server is on loopback, where a pod in its own network namespace cannot reach it',
  dns: {ip: '10.0.0.10', routedHere: true},
  metrics: {available: true, why: 'served'},
}

const check = (h: HostFacts, c: ClusterFacts | undefined, r: DoctorRequest, id: string) => diagnose(h, c, r).checks.find((k) => k.id === id)!

describe('doctor verdicts', () => {
  test('a capable host: every host check ok, the mode says it all', () => {
    const r = diagnose(full, undefined, auto)
    expect(r.checks.map((c) => [c.id, c.verdict])).toEqual([
      ['sandbox', 'ok'],
      ['walls', 'ok'],
      ['cgroups', 'ok'],
      ['pod-network', 'ok'],
      ['kubelet-port', 'ok'],
    ])
    expect(r.ok).toBe(true)
    expect(r.mode).toBe(`mode: sandbox namespaces, cgroups v1, pod network on; walls ${Walls.join(',')}`)
  })

  test('no bwrap: the sandbox, walls and pod network are missing, each with the install command; namespaces asked for fails', () => {
    const h: HostFacts = {
      ...full,
      sandbox: {mode: 'none', reason: 'bwrap (bubblewrap) is not installed'},
      programs: {...full.programs, bwrap: false},
      walls: ['user-0-only'],
      identity: false,
      layer: undefined,
      podNetwork: {enabled: false, reason: 'pods run without namespaces (--sandbox none, or the host does not allow them)'},
    }
    const sandbox = check(h, undefined, auto, 'sandbox')
    expect(sandbox).toMatchObject({
      verdict: 'missing',
      why: 'bwrap (bubblewrap) is not installed',
      fix: {byFamily: {debian: 'apt-get install -y bubblewrap', fedora: 'dnf install -y bubblewrap', arch: 'pacman -S --needed bubblewrap'}},
    })
    expect(sandbox.unmet).toBe(false)
    expect(check(h, undefined, auto, 'walls')).toMatchObject({verdict: 'missing', fix: {byFamily: {debian: 'apt-get install -y bubblewrap'}}})
    expect(check(h, undefined, auto, 'pod-network')).toMatchObject({verdict: 'missing', fix: {byFamily: {debian: 'apt-get install -y bubblewrap'}}})
    expect(diagnose(h, undefined, auto).ok).toBe(true)
    const asked = diagnose(h, undefined, {...auto, sandbox: 'namespaces'})
    expect(asked.ok).toBe(false)
    expect(asked.checks.find((c) => c.id === 'sandbox')!.unmet).toBe(true)
    expect(diagnose(h, undefined, {...auto, podNetwork: 'on'}).ok).toBe(false)
    expect(diagnose(h, undefined, auto).mode).toBe('mode: sandbox none, cgroups v1, pod network off; walls user-0-only')
  })

  test('unprivileged: the sandbox in a user namespace, one user only, no cgroups, no pod network; root is the fix', () => {
    const h: HostFacts = {
      ...full,
      uid: 65534,
      walls: ['mount', 'pid', 'ipc', 'uts', 'no-new-privs', 'proc-masks', 'user-65534-only', 'read-only-root', 'writable-layer', 'hidden-paths'],
      identity: false,
      cgroups: {mode: 'none', reason: 'cgroup v1: cannot create a cgroup in /sys/fs/cgroup/memory: EACCES'},
      podNetwork: {enabled: false, reason: 'it needs root'},
      programs: {...full.programs, iptables: false},
    }
    const r = diagnose(h, undefined, auto)
    expect(check(h, undefined, auto, 'sandbox')).toMatchObject({verdict: 'ok', why: 'mount, PID and UTS namespaces (bubblewrap, in a user namespace)'})
    expect(check(h, undefined, auto, 'walls')).toMatchObject({verdict: 'missing', fix: {text: 'run as root for any user and capability set'}})
    expect(check(h, undefined, auto, 'cgroups')).toMatchObject({verdict: 'missing', fix: {text: 'run as root (cgroup v1 is not delegated to users)'}})
    expect(check({...h, cgroupV2: true}, undefined, auto, 'cgroups').fix).toEqual({
      text: 'run as root, or in a delegated cgroup v2 subtree',
      command: 'systemd-run --user --scope -p Delegate=yes kubectl vnode up',
    })
    const net = check(h, undefined, auto, 'pod-network')
    expect(net).toMatchObject({verdict: 'missing', why: 'it needs root; iptables is not on PATH', fix: {text: 'run as root', byFamily: {debian: 'sudo apt-get install -y iptables'}}})
    expect(r.ok).toBe(true)
    expect(diagnose(h, undefined, {...auto, cgroups: 'v1'}).ok).toBe(false)
  })

  test('turned off by a flag is off, not missing, and never fails', () => {
    const r = diagnose(full, undefined, {sandbox: 'none', cgroups: 'none', podNetwork: 'off', relay: 'auto'})
    expect(r.checks.filter((c) => c.verdict === 'off').map((c) => c.id)).toEqual(['sandbox', 'walls', 'cgroups', 'pod-network'])
    expect(r.ok).toBe(true)
    expect(r.mode).toMatch(/^mode: sandbox none, cgroups none, pod network off;/)
    // The pod network runs in the sandbox: off with it, and asked for without it, it cannot work.
    expect(check(full, undefined, {...auto, sandbox: 'none'}, 'pod-network')).toMatchObject({verdict: 'off', fix: {text: 'drop --sandbox none'}, unmet: false})
    expect(diagnose(full, undefined, {...auto, sandbox: 'none', podNetwork: 'on'}).ok).toBe(false)
  })

  test('CNI plugins missing: the package per family, Fedora linking its plugin directory', () => {
    const h = {
      ...full,
      cniMissing: ['bridge', 'portmap'],
      podNetwork: {enabled: false, reason: 'CNI plugins missing in /usr/lib/cni: bridge, portmap (Debian: apt-get install containernetworking-plugins)'},
    }
    const fix = check(h, undefined, auto, 'pod-network').fix!
    expect(fix.byFamily).toEqual({
      debian: 'apt-get install -y containernetworking-plugins',
      fedora: 'dnf install -y containernetworking-plugins && { [ -e /usr/lib/cni ] || ln -s /usr/libexec/cni /usr/lib/cni; }',
      arch: 'pacman -S --needed cni-plugins',
    })
    expect(installCommands(['cni', 'iptables'], 1000).debian).toBe('sudo apt-get install -y containernetworking-plugins iptables')
    expect(installCommands(['cni', 'iptables'], 1000).fedora).toMatch(/^sudo dnf install -y containernetworking-plugins iptables-nft && /)
  })

  test('a loopback API server: auto leaves the pod network off, and says how to turn it on; on is ok', () => {
    expect(check(full, local, auto, 'pod-network')).toMatchObject({verdict: 'off', fix: {command: 'kubectl vnode up --pod-network on'}})
    expect(diagnose(full, local, auto).mode).toMatch(/pod network off;/)
    expect(check(full, local, {...auto, podNetwork: 'on'}, 'pod-network').verdict).toBe('ok')
    expect(diagnose(full, local, {...auto, podNetwork: 'on'}).mode).toMatch(/pod network on;/)
  })

  test('the kubelet port: the default may be taken (up picks another); one asked for must be free', () => {
    expect(check({...full, port: {port: 10250, free: false}}, undefined, auto, 'kubelet-port')).toMatchObject({verdict: 'ok'})
    const taken = diagnose({...full, port: {port: 8080, free: false}}, undefined, {...auto, port: 8080})
    expect(taken.ok).toBe(false)
    expect(taken.checks.find((c) => c.id === 'kubelet-port')).toMatchObject({verdict: 'missing', why: 'port 8080 is in use', fix: {command: 'kubectl vnode up --port 0'}})
    expect(check({...full, uid: 1000, port: {port: 80, free: false}}, undefined, {...auto, port: 80}, 'kubelet-port').why).toBe('port 80 is below 1024 and needs root')
  })

  test('the cluster: local has DNS, metrics and needs no relay; remote has no route for Services, and up may make a relay', () => {
    expect(
      diagnose(full, local, auto)
        .checks.slice(5)
        .map((c) => [c.id, c.verdict]),
    ).toEqual([
      ['cluster', 'ok'],
      ['services', 'ok'],
      ['metrics', 'ok'],
      ['relay', 'ok'],
    ])
    const r = diagnose(full, remote, auto)
    expect(r.checks.find((c) => c.id === 'services')).toMatchObject({verdict: 'missing', fix: {text: expect.stringContaining('not available yet')}})
    expect(r.checks.find((c) => c.id === 'relay')).toMatchObject({
      verdict: 'ok',
      why: 'up --relay auto asks the API server to reach the node after registration and uses a relay pod when it does not: this user may make it in vnode-system, and 3 nodes may run it',
    })
    expect(r.checks.find((c) => c.id === 'metrics')).toMatchObject({verdict: 'missing', fix: {text: expect.stringContaining('metrics-server')}})
  })

  test('a local control plane whose kube-proxy is not running: its ClusterIPs go nowhere, and the fix starts it again', () => {
    const stopped = {...local, localServices: {kubeProxy: false, skipped: 'kube-proxy skipped: not built (run: kubectl vnode cluster build)'}}
    expect(check(full, stopped, auto, 'services')).toMatchObject({
      verdict: 'missing',
      why: expect.stringContaining("this cluster's kube-proxy is not running (kube-proxy skipped: not built (run: kubectl vnode cluster build)): its ClusterIPs are swallowed by its own device"),
      fix: {command: 'kubectl vnode cluster down && kubectl vnode cluster up'},
    })
    expect(
      check(
        full,
        {...local, localServices: {kubeProxy: false, skipped: 'kube-proxy skipped: it needs root (a network namespace of its own, its rules and a route for the service range)'}},
        auto,
        'services',
      ).fix,
    ).toMatchObject({command: 'sudo kubectl vnode cluster up'})
    expect(check(full, {...local, localServices: {kubeProxy: true}}, auto, 'services').verdict).toBe('ok')
  })

  test('an unreachable cluster is a verdict: missing with kubectl words, the rest not known, and doctor still exits 0', () => {
    const r = diagnose(
      full,
      {server: 'https://127.0.0.1:1', reachable: false, loopback: true, error: 'The connection to the server 127.0.0.1:1 was refused', metrics: {available: false, why: ''}},
      auto,
    )
    expect(r.checks.find((c) => c.id === 'cluster')).toMatchObject({verdict: 'missing', why: 'The connection to the server 127.0.0.1:1 was refused', fix: {command: 'kubectl vnode cluster up'}})
    expect(r.checks.filter((c) => /not known/.test(c.why)).map((c) => c.id)).toEqual(['services', 'metrics', 'relay'])
    expect(r.ok).toBe(true)
  })
})

describe('the distribution family', () => {
  test('from ID and ID_LIKE', () => {
    expect(osFamily('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')).toBe('debian')
    expect(osFamily('ID=ubuntu\nID_LIKE=debian\n')).toBe('debian')
    expect(osFamily('ID=linuxmint\nID_LIKE="ubuntu debian"\n')).toBe('debian')
    expect(osFamily('ID=fedora\n')).toBe('fedora')
    expect(osFamily('ID="rocky"\nID_LIKE="rhel centos fedora"\n')).toBe('fedora')
    expect(osFamily('ID=arch\n')).toBe('arch')
    expect(osFamily('ID=endeavouros\nID_LIKE=arch\n')).toBe('arch')
    expect(osFamily('ID=alpine\n')).toBeUndefined()
    expect(osFamily('')).toBeUndefined()
    expect(osName('PRETTY_NAME="Fedora Linux 41"\nID=fedora\n')).toBe('Fedora Linux 41')
  })

  test("the text names this family's command, or every family's when the family is not known", () => {
    const fix = {byFamily: installCommands(['bubblewrap'], 1000)}
    expect(fixLines(fix, 'arch')).toEqual(['sudo pacman -S --needed bubblewrap'])
    expect(fixLines(fix, undefined)).toEqual(['Debian/Ubuntu: sudo apt-get install -y bubblewrap', 'Fedora: sudo dnf install -y bubblewrap', 'Arch: sudo pacman -S --needed bubblewrap'])
    const h: HostFacts = {
      ...full,
      sandbox: {mode: 'none', reason: 'bwrap (bubblewrap) is not installed'},
      programs: {...full.programs, bwrap: false},
      walls: ['user-0-only'],
      identity: false,
      layer: undefined,
    }
    const text = doctorText(diagnose(h, undefined, auto), {color: false})
    expect(text.split('\n')[0]).toBe('host: Debian GNU/Linux 12 (bookworm), uid 0')
    expect(text).toMatch(/^pod sandbox +missing +bwrap \(bubblewrap\) is not installed$/m)
    expect(text).toMatch(/^ +fix: apt-get install -y bubblewrap$/m)
    expect(text.trimEnd().split('\n').at(-1)).toBe('mode: sandbox none, cgroups v1, pod network off; walls user-0-only')
  })
})

// The reference node: a real kubelet (built from the pinned k8s.io/kubernetes)
// with Debian's containerd and runc, joined to a local control plane. Test
// tooling, not a runtime dependency. Everything is namespaced under one
// directory and one name (containerd root, state, socket and runc root; netns
// mounts; CNI config and host-local data; bridge and subnet; cgroup root;
// kubelet ports), so several runs and other nodes coexist; it is stopped by
// pid and leaves no mount, cgroup, bridge, sysctl change or process behind.
// Nothing leaves the machine: the bridge has no masquerade and no gateway
// route, and ip_forward is never touched.
//
//   node test/conformance/reference-node.mjs up --cluster-dir D --dir R [--name N]
//   node test/conformance/reference-node.mjs down --dir R
import {spawn} from 'node:child_process'
import {closeSync, existsSync, openSync, readdirSync, readFileSync} from 'node:fs'
import {mkdir, readFile, readlink, rm, rmdir, writeFile} from 'node:fs/promises'
import {createHash} from 'node:crypto'
import {join} from 'node:path'
import {execa} from 'execa'
import {buildKubelet} from './kubelet-build.mjs'
import {makeBusyboxImage, makePauseImage, PauseImage} from './images.mjs'
import {repoRoot} from './paths.mjs'

export const DebianPackages = ['containerd', 'runc', 'containernetworking-plugins', 'busybox-static']
export const CniBinDir = '/usr/lib/cni'
export const DefaultReadyTimeoutMs = 60_000
export const DefaultStopTimeoutMs = 20_000
/** What the kubelet writes at start with protectKernelDefaults off; saved before and restored. */
export const KernelTunables = ['vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/panic', 'kernel/panic_on_oops', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes']
/** A cluster DNS address so ClusterFirst pods get no MissingClusterDNS event (nothing answers it). */
export const ClusterDns = '10.0.0.10'
const CgroupHierarchies = '/sys/fs/cgroup'

const dist = (m) => import(join(repoRoot, 'dist', m))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Is everything the reference node needs on this machine? Returns what is missing. */
export function missingPrerequisites() {
  const missing = []
  if (process.getuid?.() !== 0) missing.push('root')
  for (const [what, path] of [
    ['containerd', '/usr/bin/containerd'],
    ['runc', '/usr/sbin/runc'],
    ['ctr', '/usr/bin/ctr'],
    ['CNI bridge plugin', `${CniBinDir}/bridge`],
    ['busybox-static', '/bin/busybox'],
    ['gcc', '/usr/bin/gcc'],
  ]) {
    if (!existsSync(path)) missing.push(`${what} (${path})`)
  }
  return missing
}

/** apt-get the Debian packages when some are missing (root only). */
export async function installPrerequisites(log) {
  if (missingPrerequisites().length === 0 || process.getuid?.() !== 0) return
  log(`reference node: apt-get install ${DebianPackages.join(' ')}`)
  const env = {...process.env, DEBIAN_FRONTEND: 'noninteractive'}
  await execa('apt-get', ['update', '-qq'], {env})
  await execa('apt-get', ['install', '-y', '-qq', ...DebianPackages, 'gcc', 'libc6-dev'], {env})
}

/** A /24 no route on this machine covers, picked from the name so runs differ. */
async function pickSubnet(name) {
  const {stdout} = await execa('ip', ['-4', 'route', 'show'])
  const seed = createHash('sha256').update(name).digest()
  for (let i = 0; i < 200; i++) {
    const subnet = `10.${200 + (seed[0] % 40)}.${(seed[1] + i) % 256}.0/24`
    const prefix = subnet.split('.').slice(0, 3).join('.') + '.'
    if (!stdout.includes(prefix)) return subnet
  }
  throw new Error('no free /24 for the reference node bridge')
}

function containerdConfig(r) {
  return `version = 2
root = "${r.dir}/containerd/root"
state = "${r.dir}/containerd/state"
[grpc]
  address = "${r.socket}"
[ttrpc]
  address = "${r.dir}/containerd/containerd-ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${r.dir}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PauseImage}"
  # The VM's bounding set lacks CAP_SYS_RESOURCE: nobody may lower oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CniBinDir}"
    conf_dir = "${r.dir}/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "${r.dir}/runc"
        SystemdCgroup = false
`
}

function cniConfig(r) {
  // isGateway off: the bridge plugin would turn on ip_forward. The bridge's
  // address is set here instead, so the kubelet's probes reach the pods.
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: r.bridge,
      plugins: [
        {
          type: 'bridge',
          bridge: r.bridge,
          isGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {type: 'host-local', ranges: [[{subnet: r.subnet, gateway: r.gateway}]], dataDir: `${r.dir}/cni/ipam`},
        },
        {type: 'portmap', capabilities: {portMappings: true}, snat: false},
      ],
    },
    null,
    2,
  )
}

function kubeletConfig(r) {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${r.nodeIp}
port: ${r.port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ${r.healthzPort}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${r.caCert}}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /${r.name}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${r.socket}
clusterDNS: [${ClusterDns}]
clusterDomain: cluster.local
makeIPTablesUtilChains: false
protectKernelDefaults: false
podLogsDir: ${r.dir}/pod-logs
staticPodPath: ""
registerNode: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
volumePluginDir: ${r.dir}/volume-plugins
localStorageCapacityIsolation: true
`
}

function daemon(bin, args, logFile) {
  const fd = openSync(logFile, 'a', 0o600)
  try {
    const child = spawn(bin, args, {detached: true, stdio: ['ignore', fd, fd], env: {PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}})
    child.on('error', () => undefined)
    child.unref()
    return child.pid
  } finally {
    closeSync(fd)
  }
}

async function readTunables() {
  const saved = {}
  for (const t of KernelTunables) saved[t] = (await readFile(`/proc/sys/${t}`, 'utf8').catch(() => '')).trim()
  return saved
}

async function restoreTunables(saved) {
  for (const [t, v] of Object.entries(saved ?? {})) {
    if (v === '') continue
    const now = (await readFile(`/proc/sys/${t}`, 'utf8').catch(() => '')).trim()
    if (now !== v) await writeFile(`/proc/sys/${t}`, v).catch(() => undefined)
  }
}

/** The v1 hierarchies (cpuset, memory, ...) that the kubelet's cgroupfs driver uses. */
function hierarchies() {
  return readdirSync(CgroupHierarchies).filter((h) => h !== 'unified' && existsSync(join(CgroupHierarchies, h, 'cgroup.procs')))
}

/**
 * Every hierarchy a node's cgroups may end up in: the v1 ones, and on a hybrid host the unified
 * (v2) one, where the kubelet makes the root too although it runs nothing there.
 */
function allHierarchies() {
  return readdirSync(CgroupHierarchies).filter((h) => existsSync(join(CgroupHierarchies, h, 'cgroup.procs')))
}

/** A new v1 cpuset cgroup starts with empty cpus/mems: pre-create the root with the parent's. */
async function createCgroupRoot(name) {
  for (const h of hierarchies()) await mkdir(join(CgroupHierarchies, h, name), {recursive: true})
  const cpuset = join(CgroupHierarchies, 'cpuset')
  if (existsSync(join(cpuset, 'cpuset.cpus'))) {
    for (const f of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(cpuset, name, f), await readFile(join(cpuset, f), 'utf8'))
  }
}

async function removeCgroupTree(path) {
  if (!existsSync(path)) return
  for (const e of readdirSync(path, {withFileTypes: true})) if (e.isDirectory()) await removeCgroupTree(join(path, e.name))
  for (let i = 0; i < 20; i++) {
    try {
      await rmdir(path)
      return
    } catch (error) {
      if (error.code === 'ENOENT') return
      await sleep(250)
    }
  }
  throw new Error(`cgroup ${path} could not be removed`)
}

async function statePath(dir) {
  return join(dir, 'state.json')
}

export async function readState(dir) {
  return JSON.parse(await readFile(await statePath(dir), 'utf8').catch(() => 'null'))
}

async function writeState(r) {
  await writeFile(await statePath(r.dir), JSON.stringify(r, null, 2), {mode: 0o600})
}

async function ctr(r, args) {
  return execa('ctr', ['--address', r.socket, '--namespace', 'k8s.io', ...args])
}

async function waitFor(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    let v
    try {
      v = await fn()
    } catch (error) {
      if (/exited/.test(error.message)) throw error
    }
    if (v) return v
    if (Date.now() > deadline) throw new Error(`reference node: timed out waiting for ${what}`)
    await sleep(300)
  }
}

/**
 * Starts the reference node. `clusterDir` is a `kubectl vnode cluster up`
 * directory (its pki/ holds the cluster CA).
 */
export async function startReferenceNode({clusterDir, dir, name, log = (l) => console.error(l)}) {
  const missing = missingPrerequisites()
  if (missing.length > 0) throw new Error(`reference node: missing ${missing.join(', ')}`)
  const {pinnedVersions} = await dist('cluster/versions.js')
  const {issueCert, ensurePrivateDir} = await dist('common/pki.js')
  const {freePort} = await dist('common/ports.js')
  const {hostAddresses} = await dist('cluster/host.js')
  const {readState: readClusterState} = await dist('cluster/controlplane.js')
  const {kubeconfigYaml} = await dist('cluster/cluster-pki.js')
  const cluster = await readClusterState(clusterDir)
  if (!cluster) throw new Error(`reference node: no control plane in ${clusterDir}`)
  const kubelet = await buildKubelet(log)
  await ensurePrivateDir(dir)
  for (const d of ['containerd', 'cni/net.d', 'cni/ipam', 'kubelet', 'pod-logs', 'runc', 'logs', 'images']) await mkdir(join(dir, d), {recursive: true})
  const subnet = await pickSubnet(name)
  const base = subnet.split('.').slice(0, 3).join('.')
  const r = {
    name,
    dir,
    subnet,
    gateway: `${base}.1`,
    bridge: `vn${createHash('sha256').update(name).digest('hex').slice(0, 10)}`,
    socket: join(dir, 'containerd', 'containerd.sock'),
    caCert: join(clusterDir, 'pki', 'ca.crt'),
    nodeIp: hostAddresses()[0] ?? '127.0.0.1',
    port: await freePort('0.0.0.0'),
    healthzPort: await freePort(),
    pids: {},
    tunables: await readTunables(),
    kubelet,
    server: cluster.server,
  }
  await writeState(r)
  try {
    // Credentials: system:node:<name> from the cluster CA (Node authorizer, NodeRestriction).
    const pki = join(dir, 'pki')
    const ca = {cert: join(clusterDir, 'pki', 'ca.crt'), key: join(clusterDir, 'pki', 'ca.key')}
    const cert = await issueCert(pki, ca, {name: 'kubelet-client', commonName: `system:node:${name}`, organizations: ['system:nodes'], usage: 'client'})
    await writeFile(join(dir, 'kubeconfig'), kubeconfigYaml(cluster.server, ca.cert, cert, `system:node:${name}`), {mode: 0o600})
    await writeFile(join(dir, 'containerd', 'config.toml'), containerdConfig(r))
    await writeFile(join(dir, 'cni', 'net.d', '10-conformance.conflist'), cniConfig(r))
    await writeFile(join(dir, 'kubelet-config.yaml'), kubeletConfig(r))
    // The bridge with its address: the host reaches its pods on a connected route, nothing is forwarded.
    await execa('ip', ['link', 'add', r.bridge, 'type', 'bridge'])
    r.bridgeCreated = true
    await writeState(r)
    await execa('ip', ['addr', 'add', `${r.gateway}/24`, 'dev', r.bridge])
    await execa('ip', ['link', 'set', r.bridge, 'up'])
    await createCgroupRoot(name)
    r.cgroupCreated = true
    log(`reference node ${name}: containerd`)
    r.pids.containerd = daemon('/usr/bin/containerd', ['--config', join(dir, 'containerd', 'config.toml')], join(dir, 'logs', 'containerd.log'))
    await writeState(r)
    await waitFor('containerd', async () => (await ctr(r, ['version'])).exitCode === 0, 20_000)
    const v = pinnedVersions().kubernetes
    for (const [file, make] of [
      ['busybox.tar', makeBusyboxImage],
      ['pause.tar', (o) => makePauseImage(o, v)],
    ]) {
      const tar = join(dir, 'images', file)
      await make(tar)
      await ctr(r, ['images', 'import', tar])
    }
    log(`reference node ${name}: kubelet ${v}`)
    r.pids.kubelet = daemon(
      kubelet,
      [
        `--config=${join(dir, 'kubelet-config.yaml')}`,
        `--kubeconfig=${join(dir, 'kubeconfig')}`,
        `--root-dir=${join(dir, 'kubelet')}`,
        `--cert-dir=${join(dir, 'kubelet', 'pki')}`,
        `--hostname-override=${name}`,
        `--node-ip=${r.nodeIp}`,
        '--v=1',
      ],
      join(dir, 'logs', 'kubelet.log'),
    )
    await writeState(r)
    await waitFor(
      'the Node to be Ready',
      async () => {
        if (!alive(r.pids.kubelet)) throw new Error('reference node: the kubelet exited')
        return nodeReady(dir, name)
      },
      DefaultReadyTimeoutMs,
    )
    // The kubelet sets kernel tunables once at start (panic on oops would reboot a shared machine).
    await restoreTunables(r.tunables)
    log(`reference node ${name}: Ready`)
    return r
  } catch (error) {
    const tailLog = await readFile(join(dir, 'logs', 'kubelet.log'), 'utf8').catch(() => '')
    await stopReferenceNode({dir, log}).catch(() => undefined)
    throw new Error(`${error.message}\n${tailLog.split('\n').slice(-10).join('\n')}`, {cause: error})
  }
}

async function nodeReady(dir, name) {
  const {stdout} = await execa('kubectl', ['--kubeconfig', join(dir, 'kubeconfig'), 'get', 'node', name, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])
  return stdout === 'True'
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function stopPid(pid, timeoutMs) {
  if (!pid || !alive(pid)) return
  process.kill(pid, 'SIGTERM')
  const deadline = Date.now() + timeoutMs
  while (alive(pid) && Date.now() < deadline) await sleep(200)
  if (alive(pid)) process.kill(pid, 'SIGKILL')
  while (alive(pid)) await sleep(100)
}

/** Mount points at or under dir, deepest first (so they unmount in order). */
export async function mountsUnder(dir) {
  const text = await readFile('/proc/self/mountinfo', 'utf8')
  const unescape = (s) => s.replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
  return text
    .split('\n')
    .map((l) => unescape(l.split(' ')[4] ?? ''))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

/** Processes whose cgroup (any hierarchy) is under the node's cgroup root. */
function processesInCgroupRoot(name) {
  const pids = []
  for (const h of hierarchies()) {
    const walk = (p) => {
      if (!existsSync(p)) return
      for (const e of readdirSync(p, {withFileTypes: true})) if (e.isDirectory()) walk(join(p, e.name))
      const procs = existsSync(join(p, 'cgroup.procs'))
        ? String(readFileSyncSafe(join(p, 'cgroup.procs')))
            .split('\n')
            .filter(Boolean)
        : []
      pids.push(...procs.map(Number))
    }
    walk(join(CgroupHierarchies, h, name))
  }
  return [...new Set(pids)]
}

function readFileSyncSafe(p) {
  try {
    return readFileSync(p, 'utf8')
  } catch {
    return ''
  }
}

/**
 * Stops the reference node: the kubelet, then every sandbox through the CRI,
 * then containerd and its shims (by pid), then unmounts what is left, removes
 * the cgroups and the bridge, restores the kernel tunables.
 */
export async function stopReferenceNode({dir, log = (l) => console.error(l)}) {
  const r = await readState(dir)
  if (!r) return
  await stopPid(r.pids.kubelet, DefaultStopTimeoutMs)
  if (r.pids.containerd && alive(r.pids.containerd)) {
    const crictlLike = async (args) => ctr(r, args).catch(() => ({stdout: ''}))
    // Tasks first (SIGKILL: the kubelet, which would have drained them, is gone), then containers.
    const {stdout} = await crictlLike(['tasks', 'list', '-q'])
    for (const id of stdout.split('\n').filter(Boolean)) await crictlLike(['tasks', 'kill', '-s', 'SIGKILL', id])
    await sleep(500)
    for (const id of stdout.split('\n').filter(Boolean)) await crictlLike(['tasks', 'delete', '-f', id])
    const {stdout: cs} = await crictlLike(['containers', 'list', '-q'])
    for (const id of cs.split('\n').filter(Boolean)) await crictlLike(['containers', 'delete', id])
  }
  // Shims outlive containerd: they are found through the cgroup root and the state dir.
  const shims = await shimPids(dir)
  await stopPid(r.pids.containerd, DefaultStopTimeoutMs)
  for (const pid of [...shims, ...processesInCgroupRoot(r.name)]) await stopPid(pid, 5_000)
  for (const m of await mountsUnder(dir)) await execa('umount', ['-l', m]).catch(() => undefined)
  if (r.cgroupCreated) for (const h of allHierarchies()) await removeCgroupTree(join(CgroupHierarchies, h, r.name))
  if (r.bridgeCreated) await execa('ip', ['link', 'del', r.bridge]).catch(() => undefined)
  await removeVethsOf(r.bridge)
  await removeContainerLogLinks(dir)
  await restoreTunables(r.tunables)
  r.pids = {}
  r.bridgeCreated = false
  r.cgroupCreated = false
  await writeState(r)
  log(`reference node ${r.name}: stopped`)
}

/** containerd-shim processes started for this node (their argv names its socket). */
async function shimPids(dir) {
  const out = []
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    const cmd = readFileSyncSafe(`/proc/${p}/cmdline`).split('\0')
    if (cmd[0]?.includes('containerd-shim') && cmd.some((a) => a.startsWith(dir))) out.push(Number(p))
  }
  return out
}

async function removeVethsOf(bridge) {
  const {stdout} = await execa('ip', ['-o', 'link', 'show', 'master', bridge]).catch(() => ({stdout: ''}))
  for (const line of stdout.split('\n').filter(Boolean)) {
    const dev = line.split(':')[1]?.trim().split('@')[0]
    if (dev) await execa('ip', ['link', 'del', dev]).catch(() => undefined)
  }
}

/** The kubelet links container logs from /var/log/containers: drop the links that point into dir. */
async function removeContainerLogLinks(dir) {
  const links = '/var/log/containers'
  if (!existsSync(links)) return
  for (const f of readdirSync(links)) {
    const target = await readlink(join(links, f)).catch(() => '')
    if (target.startsWith(dir)) await rm(join(links, f), {force: true})
  }
}

/** What the reference node could leave behind; empty when it left nothing. */
export async function leftovers(dir) {
  const r = await readState(dir)
  if (!r) return []
  const left = []
  for (const [what, pid] of Object.entries(r.pids ?? {})) if (alive(pid)) left.push(`process ${what} ${pid}`)
  for (const pid of await shimPids(dir)) left.push(`shim ${pid}`)
  for (const m of await mountsUnder(dir)) left.push(`mount ${m}`)
  for (const h of allHierarchies()) if (existsSync(join(CgroupHierarchies, h, r.name))) left.push(`cgroup ${h}/${r.name}`)
  const {exitCode} = await execa('ip', ['link', 'show', r.bridge], {reject: false})
  if (exitCode === 0) left.push(`bridge ${r.bridge}`)
  const now = await readTunables()
  for (const [t, v] of Object.entries(r.tunables ?? {})) if (v !== '' && now[t] !== v) left.push(`sysctl ${t}=${now[t]} (was ${v})`)
  return left
}

async function main(argv) {
  const [cmd, ...rest] = argv
  const opt = (flag) => {
    const i = rest.indexOf(flag)
    return i >= 0 ? rest[i + 1] : undefined
  }
  const dir = opt('--dir')
  if (!dir) throw new Error('--dir is required')
  if (cmd === 'up') {
    const clusterDir = opt('--cluster-dir')
    if (!clusterDir) throw new Error('--cluster-dir is required')
    const r = await startReferenceNode({clusterDir, dir, name: opt('--name') ?? 'reference-kubelet'})
    console.log(JSON.stringify({name: r.name, kubelet: r.pids.kubelet, containerd: r.pids.containerd}))
  } else if (cmd === 'down') {
    await stopReferenceNode({dir})
    const left = await leftovers(dir)
    if (left.length > 0) throw new Error(`left behind: ${left.join(', ')}`)
  } else if (cmd === 'build') {
    await buildKubelet()
  } else {
    throw new Error(`unknown command ${cmd ?? ''}: use up, down or build`)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(`error: ${e.message}`)
    process.exit(1)
  })
}

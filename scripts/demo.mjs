#!/usr/bin/env node
// `npm run demo`: check what this host gives a pod (kubectl vnode doctor) and say what the demo will
// and will not show, then build the control plane (cached), start it, start a node with everything
// the host allows (the sandbox, cgroups, the pod network) and a sample workload, and hand the
// terminal to `kubectl vnode up`. Ctrl-C stops the node; `kubectl vnode cluster down` stops the
// control plane. `npm run demo -- --plan` stops after saying what it would do; other arguments go to
// `up` (e.g. `-- --sandbox none`).
import {execFileSync, spawn, spawnSync} from 'node:child_process'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
// The plugin file itself, as kubectl runs it: its first lines give node the environment it runs in (one malloc arena).
const cli = join(root, 'bin', 'kubectl-vnode')
const run = (args) => execFileSync(cli, args, {stdio: 'inherit'})
const capture = (args) => execFileSync(cli, args, {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']})
const say = (line = '') => process.stdout.write(`${line}\n`)

const planOnly = process.argv.includes('--plan')
const upArgs = process.argv.slice(2).filter((a) => a !== '--plan')
/** The value of one of up's flags in the demo's arguments (`--flag v` or `--flag=v`). */
const given = (flag) => {
  const i = upArgs.findIndex((a) => a === flag || a.startsWith(`${flag}=`))
  if (i < 0) return undefined
  return upArgs[i].includes('=') ? upArgs[i].slice(flag.length + 1) : upArgs[i + 1]
}
const modeFlags = ['--sandbox', '--cgroups', '--pod-network'].flatMap((f) => (given(f) === undefined ? [] : [f, given(f)]))

// What this host gives, before anything is built: doctor's own verdicts (this host only; the cluster is the demo's).
const probe = spawnSync(cli, ['doctor', '--host-only', '-o', 'json', ...modeFlags], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']})
let report
try {
  report = JSON.parse(probe.stdout)
} catch {
  process.stderr.write('demo: kubectl vnode doctor did not answer\n')
  process.exit(1)
}
const check = Object.fromEntries(report.checks.map((c) => [c.id, c]))
// The pod network's auto stays off with the demo's control plane on loopback: where the host allows it, ask for it.
const network = check['pod-network'].verdict === 'ok' && given('--pod-network') === undefined ? ['--pod-network', 'on'] : []
const doctorArgs = ['doctor', '--host-only', ...modeFlags, ...network]

say('demo: what this host gives a pod (kubectl vnode doctor --host-only):')
const doctor = spawnSync(cli, doctorArgs, {stdio: 'inherit'})
const fix = (c) => {
  const f = c.fix ?? {}
  const command = (report.host.family && f.byFamily?.[report.host.family]) || f.command || Object.values(f.byFamily ?? {})[0]
  return [f.text, command].filter(Boolean).join(': ')
}
const shows = []
const missing = []
const ok = (id) => check[id].verdict === 'ok'
const lack = (id, what) => missing.push(`${what}: ${check[id].why}${check[id].fix ? `; to get it: ${fix(check[id])}` : ''}`)
shows.push('a node, vnode-demo, on a control plane of its own on this machine, and its dashboard')
shows.push('examples/hello.yaml: two replicas of an HTTP server on port 8080, a ConfigMap mounted at /etc/hello, a readiness probe on the port')
if (ok('sandbox')) shows.push('each pod in its own sandbox: the server is PID 1, the ConfigMap at its real path /etc/hello')
else lack('sandbox', 'no pod sandbox: the pods are bare host processes and find the ConfigMap under $VNODE_VOLUME_ROOT/etc/hello')
if (check.walls.verdict !== 'ok' && ok('sandbox')) lack('walls', 'not every wall')
if (ok('cgroups')) shows.push(`limits enforced and usage read from the kernel (${report.mode.match(/cgroups (\S+),/)[1]})`)
else lack('cgroups', 'no cgroups: limits are not enforced, usage comes from /proc')
if (network.length || ok('pod-network')) shows.push('a network namespace and address per pod: both replicas listen on 8080')
else lack('pod-network', 'no pod network: both replicas share the host port 8080, so the second waits, saying the first holds it')
if (report.host.uid === 0)
  shows.push('Services: the control plane runs kube-proxy, CoreDNS and metrics-server, so pods resolve and dial Services (kube-proxy only where no other local control plane holds the service route)')
else missing.push('Services: kube-proxy needs root, and without it pods can neither resolve nor dial Service ClusterIPs; to get it: run the demo as root')
say()
say('demo: it will show')
for (const s of shows) say(`  - ${s}`)
if (missing.length) {
  say('demo: it will not show')
  for (const m of missing) say(`  - ${m}`)
}
say('demo: nor a remote cluster: a node of one needs its API server to reach this host, and there is no relay for that yet')
if (doctor.status !== 0) {
  process.stderr.write(`demo: ${upArgs.join(' ')} asks for what this host cannot give (see above)\n`)
  process.exit(1)
}
if (planOnly) process.exit(0)
say()

run(['cluster', 'build'])
const out = capture(['cluster', 'up'])
process.stdout.write(out)
const kubeconfig = /export KUBECONFIG=(.*)/.exec(out)[1]
const env = {...process.env, KUBECONFIG: kubeconfig}
const kubectl = join(capture(['cluster', 'build']).trim(), 'kubectl')

// The sample workload first, while this terminal is still ours: its pods wait for the node, and
// nothing but the dashboard writes to the screen once it is up (a stray line there shifts every
// later frame down by one: the dashboard's first line is drawn twice).
try {
  execFileSync(kubectl, ['apply', '-f', join(root, 'examples', 'hello.yaml')], {stdio: 'inherit', env})
} catch {
  process.stderr.write('demo: could not apply examples/hello.yaml\n')
}
say('demo: starting vnode-demo in')
say(report.mode)
const node = spawn(cli, ['up', '--name', 'vnode-demo', ...network, ...upArgs], {stdio: 'inherit', env})
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => node.kill(sig))
node.on('exit', (code) => {
  process.stdout.write(`\nthe control plane is still running: export KUBECONFIG=${kubeconfig}\nstop it with: bin/kubectl-vnode cluster down\n`)
  process.exit(code ?? 0)
})

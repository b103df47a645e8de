#!/usr/bin/env node
// `npm run demo`: build the control plane (cached), start it, start a node and
// a sample workload, and hand the terminal to `kubectl vnode up`.
// Ctrl-C stops the node; `kubectl vnode cluster down` stops the control plane.
import {execFileSync, spawn} from 'node:child_process'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const cli = join(root, 'bin', 'kubectl-vnode')
const run = (args) => execFileSync(process.execPath, [cli, ...args], {stdio: 'inherit'})
const capture = (args) => execFileSync(process.execPath, [cli, ...args], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']})

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
const node = spawn(process.execPath, [cli, 'up', '--name', 'vnode-demo', ...process.argv.slice(2)], {stdio: 'inherit', env})
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => node.kill(sig))
node.on('exit', (code) => {
  process.stdout.write(`\nthe control plane is still running: export KUBECONFIG=${kubeconfig}\nstop it with: node bin/kubectl-vnode cluster down\n`)
  process.exit(code ?? 0)
})

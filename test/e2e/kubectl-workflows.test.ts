import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {chmodSync, existsSync, mkdirSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {KubectlFixture, NODE} from './kubectl-fixture.js'
import {describeE2e, kubectl, serverPort, stopAllVnodes, testEnv, uniqueName, waitFor} from './helpers.js'

/** The label every node has with its own name; a workload selects the node of its file by it. */
const HostnameLabel = 'kubernetes.io/hostname'

const reportScript = `require('fs').writeFileSync(process.argv[1], JSON.stringify({env: process.env})); setInterval(() => {}, 1000)`

/** Everyday kubectl workflows: images without a command, the user's PATH, relative commands. */
describeE2e('kubectl: images people use, the user toolchain, relative commands', () => {
  const f = new KubectlFixture('kwf')
  /** `kubectl run --overrides`: the pod selects this file's node by its hostname label. */
  const onThisNode = () => JSON.stringify({apiVersion: 'v1', spec: {nodeSelector: {[HostnameLabel]: f.nodeName}}})
  const marker = uniqueName('wf')
  let imagesFile = ''

  beforeAll(async () => {
    mkdirSync(f.dir, {recursive: true, mode: 0o700})
    imagesFile = f.out('images.yaml')
    writeFileSync(
      imagesFile,
      [
        'images:',
        '  "registry.example/cache:*":',
        `    command: [vnode-missing-server-${marker}, --port, "6379"]`,
        '  "registry.example/reporter:*":',
        `    command: [${JSON.stringify(NODE)}, "-e", ${JSON.stringify(reportScript)}]`,
        '    env: {PATH: /from/image/map}',
      ].join('\n'),
    )
    // No default taint: a Deployment's pods (no toleration) may land on this node. Other files' nodes without the
    // taint run beside it, so each workload here also selects this node by its hostname label (onThisNode).
    await f.setUp(['--images', imagesFile, '--no-default-taint'])
  })
  afterAll(async () => {
    await kubectl(['delete', 'deployment', '--all', '-n', f.ns, '--wait=false'])
    await f.tearDown()
    await stopAllVnodes()
  })

  test('kubectl create deployment --image=nginx runs the host nginx in the foreground, on its port, writing only in the pod', async () => {
    const port = await serverPort()
    const logsBefore = ['access.log', 'error.log'].map((n) => (existsSync(`/var/log/nginx/${n}`) ? statSync(`/var/log/nginx/${n}`).mtimeMs : 0))
    // Made with no replica, pinned to this node, then scaled: no pod of it is ever scheduled elsewhere.
    const r = await kubectl(['create', 'deployment', 'nginx', '--image=nginx', `--port=${port}`, '--replicas=0', '-n', f.ns])
    expect(r.stderr).toBe('')
    const pin = {spec: {replicas: 1, template: {spec: {nodeSelector: {[HostnameLabel]: f.nodeName}}}}}
    expect((await kubectl(['patch', 'deployment', 'nginx', '-n', f.ns, '--type', 'merge', '-p', JSON.stringify(pin)])).exitCode).toBe(0)
    const name = await waitFor(async () => {
      const g = await kubectl(['get', 'pod', '-n', f.ns, '-l', 'app=nginx', '-o', 'jsonpath={.items[*].metadata.name}'])
      return g.stdout.trim() || undefined
    }, 'the deployment to make a pod')
    await f.waitRow(name, (row) => row.status === 'Running' && row.ready === '1/1', 'Running 1/1')
    expect(await f.jsonpath(name, '{.spec.nodeName}')).toBe(f.nodeName)
    const page = await waitFor(async () => {
      const res = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined)
      return res?.ok ? res.text() : undefined
    }, `nginx answering on ${port}`)
    expect(page).toContain('Welcome to nginx!')
    // Its access log is the container's stdout.
    await waitFor(async () => (await f.logs(name)).stdout.includes('"GET / HTTP/1.1" 200'), 'the access log line in kubectl logs')
    // Its pid and temp files are in the pod's own directories, not the host's.
    const uid = await f.jsonpath(name, '{.metadata.uid}')
    expect(existsSync(join(f.node.stateDir, 'pods', uid, 'images', 'nginx', 'nginx.pid'))).toBe(true)
    expect(existsSync('/run/nginx.pid')).toBe(false)
    const logsAfter = ['access.log', 'error.log'].map((n) => (existsSync(`/var/log/nginx/${n}`) ? statSync(`/var/log/nginx/${n}`).mtimeMs : 0))
    expect(logsAfter).toEqual(logsBefore)
    await kubectl(['delete', 'deployment', 'nginx', '-n', f.ns, '--wait=false'])
    await f.gone(name)
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined)) === undefined, 'nginx to stop listening')
  })

  test('a mapped program that is not installed: CreateContainerError naming the image, the program, where it looked and how to map it', async () => {
    await f.create({metadata: {name: 'nocache'}, spec: {terminationGracePeriodSeconds: 2, containers: [{name: 'cache', image: 'registry.example/cache:7'}]}})
    await f.waitRow('nocache', (r) => r.status === 'CreateContainerError', 'CreateContainerError')
    const message = await f.jsonpath('nocache', '{.status.containerStatuses[0].state.waiting.message}')
    expect(message).toContain(
      `image "registry.example/cache:7" runs the program "vnode-missing-server-${marker}" (entry "registry.example/cache:*" of the image map ${imagesFile}), which is not installed`,
    )
    expect(message).toContain(`looked for "vnode-missing-server-${marker}" in PATH=${testEnv().PATH}`)
    expect(message).toContain('`kubectl vnode up --images FILE`')
    await f.waitDescribe('nocache', /Warning\s+Failed\s+.*Error: image "registry.example\/cache:7" runs the program/)
    // The built-in nginx entry, on a PATH without nginx (the pod's env overrides up's PATH).
    await f.create({
      metadata: {name: 'nonginx'},
      spec: {terminationGracePeriodSeconds: 2, containers: [{name: 'web', image: 'nginx:1.25', env: [{name: 'PATH', value: '/nonexistent/bin'}]}]},
    })
    await f.waitRow('nonginx', (r) => r.status === 'CreateContainerError', 'CreateContainerError')
    expect(await f.jsonpath('nonginx', '{.status.containerStatuses[0].state.waiting.message}')).toContain(
      `image "nginx:1.25" runs the program "nginx" (entry "nginx" of vnode's built-in image map), which is not installed: looked for "nginx" in PATH=/nonexistent/bin`,
    )
    await kubectl(['delete', 'pod', 'nocache', 'nonginx', '-n', f.ns, '--wait=false'])
    await f.gone('nocache')
    await f.gone('nonginx')
  })

  test('kubectl run --image=busybox -- sh -c runs the args as the command', async () => {
    const r = await kubectl(['run', 'bb', '-n', f.ns, `--overrides=${onThisNode()}`, '--image=busybox', '--restart=Never', '--', 'sh', '-c', `echo "hello from $HOSTNAME ${marker}"; exit 3`])
    expect(r.exitCode).toBe(0)
    await f.waitRow('bb', (row) => row.status === 'Error', 'Error (exit 3)')
    expect(await f.jsonpath('bb', '{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('3')
    expect((await f.logs('bb')).stdout).toBe(`hello from bb ${marker}`)
    // Without args, the image's CMD: python runs python3, here with its input closed.
    await kubectl(['run', 'py', '-n', f.ns, `--overrides=${onThisNode()}`, '--image=docker.io/library/python:3.12', '--restart=Never'])
    await f.waitRow('py', (row) => row.status === 'Completed', 'Completed')
    await kubectl(['delete', 'pod', 'bb', 'py', '-n', f.ns, '--wait=false'])
    await f.gone('bb')
    await f.gone('py')
  })

  test("PATH is the one up was started with: the user's tools run by name; image map and pod env override it; nothing else leaks", async () => {
    // kubectl is on up's PATH only (the test's bin dir), not on the runtimes' default PATH.
    await kubectl(['run', 'tool', '-n', f.ns, `--overrides=${onThisNode()}`, '--image=any', '--restart=Never', '--command', '--', 'kubectl', 'version', '--client'])
    await f.waitRow('tool', (row) => row.status === 'Completed', 'Completed')
    expect((await f.logs('tool')).stdout).toContain('Client Version:')
    await f.create({
      metadata: {name: 'paths'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          {name: 'up', image: 'node', command: [NODE, '-e', reportScript, f.out('up.json'), marker]},
          {name: 'mapped', image: 'registry.example/reporter:1', args: [f.out('mapped.json'), marker]},
          {name: 'spec', image: 'registry.example/reporter:1', args: [f.out('spec.json'), marker], env: [{name: 'PATH', value: '/from/pod/spec'}]},
        ],
      },
    })
    await f.waitRow('paths', (r) => r.status === 'Running' && r.ready === '3/3', 'Running 3/3')
    const up = JSON.parse(await f.file('up.json')) as {env: Record<string, string>}
    expect(up.env.PATH).toBe(testEnv().PATH)
    expect(up.env.KUBECONFIG).toBeUndefined()
    expect(Object.keys(up.env).filter((k) => !['PATH', 'HOME', 'HOSTNAME'].includes(k) && process.env[k] !== undefined && process.env[k] === up.env[k])).toEqual([])
    expect((JSON.parse(await f.file('mapped.json')) as {env: Record<string, string>}).env.PATH).toBe('/from/image/map')
    expect((JSON.parse(await f.file('spec.json')) as {env: Record<string, string>}).env.PATH).toBe('/from/pod/spec')
    await kubectl(['delete', 'pod', 'tool', 'paths', '-n', f.ns, '--wait=false'])
    await f.gone('tool')
    await f.gone('paths')
    await f.noProcess(marker)
  })

  test('a relative command: the error says where it was looked for and that workingDir sets it; with workingDir it runs', async () => {
    const dir = f.out('app')
    mkdirSync(dir, {recursive: true})
    writeFileSync(join(dir, 'run.sh'), `#!/bin/sh\necho "ran in $(pwd) ${marker}"\n`)
    chmodSync(join(dir, 'run.sh'), 0o755)
    await f.create({metadata: {name: 'rel'}, spec: {restartPolicy: 'Never', terminationGracePeriodSeconds: 2, containers: [{name: 'app', image: 'app', command: ['./run.sh']}]}})
    await f.waitRow('rel', (r) => r.status === 'StartError', 'StartError')
    const message = await f.jsonpath('rel', '{.status.containerStatuses[0].state.terminated.message}')
    expect(message).toMatch(
      /^failed to start container process: exec: "\.\/run\.sh": no such file or directory: a relative command is looked up in the container's working directory "\/[^"]*" \(set workingDir to choose it\)$/,
    )
    expect(message).not.toContain('$PATH')
    await f.create({metadata: {name: 'relwd'}, spec: {restartPolicy: 'Never', terminationGracePeriodSeconds: 2, containers: [{name: 'app', image: 'app', command: ['./run.sh'], workingDir: dir}]}})
    await f.waitRow('relwd', (r) => r.status === 'Completed', 'Completed')
    expect((await f.logs('relwd')).stdout).toBe(`ran in ${dir} ${marker}`)
    await kubectl(['delete', 'pod', 'rel', 'relwd', '-n', f.ns, '--wait=false'])
    await f.gone('rel')
    await f.gone('relwd')
  })
})

import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {mkdirSync, writeFileSync} from 'node:fs'
import {KubectlFixture, NODE} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, uniqueName} from './helpers.js'

const reportScript = `require('fs').writeFileSync(process.argv[1], JSON.stringify({env: process.env, cwd: process.cwd(), argv: process.argv.slice(1)})); setInterval(() => {}, 1000)`

/** What a container runs: its command, the --images map, or a clear error. */
describeE2e('kubectl: images, commands and start errors', () => {
  const f = new KubectlFixture('kimg')
  const marker = uniqueName('img')
  let imagesFile = ''

  beforeAll(async () => {
    imagesFile = f.out('images.yaml')
    // The map must exist before `up` reads it.
    mkdirSync(f.dir, {recursive: true, mode: 0o700})
    writeFileSync(
      imagesFile,
      [
        'images:',
        '  "registry.example/greeter:*":',
        `    command: [${JSON.stringify(NODE)}, "-e", ${JSON.stringify(reportScript)}]`,
        `    args: [${JSON.stringify(f.out('mapped.json'))}, "image-arg", ${JSON.stringify(marker)}]`,
        '    env: {GREETING: from-image-map, LEVEL: image}',
        `    workingDir: ${JSON.stringify(f.dir)}`,
      ].join('\n'),
    )
    await f.setUp(['--images', imagesFile])
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('--images maps an image to the program, its args, env and workingDir; container args and env win', async () => {
    await f.create({
      metadata: {name: 'mapped'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          {name: 'plain', image: 'registry.example/greeter:1.0'},
          {name: 'custom', image: 'registry.example/greeter:2.1', args: [f.out('custom.json'), 'own-arg', marker], env: [{name: 'LEVEL', value: 'spec'}]},
        ],
      },
    })
    const row = await f.waitRow('mapped', (r) => r.status === 'Running' && r.ready === '2/2', 'Running 2/2')
    expect(row.restarts).toBe(0)
    const plain = JSON.parse(await f.file('mapped.json')) as {env: Record<string, string>; cwd: string; argv: string[]}
    expect(plain.argv).toEqual([f.out('mapped.json'), 'image-arg', marker])
    expect(plain.env).toMatchObject({GREETING: 'from-image-map', LEVEL: 'image'})
    expect(plain.cwd).toBe(f.dir)
    const custom = JSON.parse(await f.file('custom.json')) as {env: Record<string, string>; argv: string[]}
    expect(custom.argv).toEqual([f.out('custom.json'), 'own-arg', marker])
    expect(custom.env).toMatchObject({GREETING: 'from-image-map', LEVEL: 'spec'})
    expect(await f.jsonpath('mapped', '{.status.containerStatuses[*].imageID}')).toMatch(/^vnode:\/\/sha256:[0-9a-f]{64} vnode:\/\/sha256:[0-9a-f]{64}$/)
    await kubectl(['delete', 'pod', 'mapped', '-n', f.ns, '--wait=false'])
    await f.gone('mapped')
    await f.noProcess(marker)
  })

  test('an unmapped image without a command: CreateContainerError that says how to fix it', async () => {
    await f.create({metadata: {name: 'unmapped'}, spec: {terminationGracePeriodSeconds: 2, containers: [{name: 'web', image: 'registry.example/web:1.25'}]}})
    const row = await f.waitRow('unmapped', (r) => r.status === 'CreateContainerError', 'CreateContainerError')
    expect(row).toMatchObject({ready: '0/1', restarts: 0})
    const message = await f.jsonpath('unmapped', '{.status.containerStatuses[0].state.waiting.message}')
    expect(message).toBe(
      `container "web" has no command and image "registry.example/web:1.25" matches no entry in the image map ${imagesFile}: set command (and args) in the container spec, ` +
        'or map the image to a program with `kubectl vnode up --images FILE`, e.g. images: {"registry.example/web*": {command: ["/path/to/program"]}}',
    )
    expect(await f.jsonpath('unmapped', '{.status.phase}')).toBe('Pending')
    await f.waitDescribe('unmapped', /Warning\s+Failed\s+.*Error: container "web" has no command and image "registry.example\/web:1.25" matches no entry/)
    await kubectl(['delete', 'pod', 'unmapped', '-n', f.ns, '--wait=false'])
    await f.gone('unmapped')
  })

  test('a binary that does not exist: StartError, exit code 128, a Warning event; Failed under restartPolicy Never', async () => {
    const missing = `/nonexistent-${uniqueName('dir')}/server`
    await f.create({metadata: {name: 'nobin'}, spec: {restartPolicy: 'Never', terminationGracePeriodSeconds: 2, containers: [{name: 'app', image: 'app', command: [missing, '--port', '8080']}]}})
    const row = await f.waitRow('nobin', (r) => r.status === 'StartError', 'StartError')
    expect(row).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('nobin', '{.status.phase}|{.status.containerStatuses[0].state.terminated.reason}|{.status.containerStatuses[0].state.terminated.exitCode}')).toBe('Failed|StartError|128')
    const message = await f.jsonpath('nobin', '{.status.containerStatuses[0].state.terminated.message}')
    expect(message).toContain(`failed to start container process: exec: "${missing}"`)
    const described = await f.waitDescribe('nobin', /Warning\s+Failed\s+.*Error: failed to start container process/)
    expect(described).toContain(missing)
    await kubectl(['delete', 'pod', 'nobin', '-n', f.ns, '--wait=false'])
    await f.gone('nobin')
  })
})

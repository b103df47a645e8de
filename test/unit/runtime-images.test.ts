import {describe, expect, test} from '@jest/globals'
import {ImageMap, imageCandidates, missingProgramMessage, resolveProgram} from '../../src/emulator/runtime/images/image-map.js'
import {defaultImageMap} from '../../src/emulator/runtime/images/default-images.js'

const map = ImageMap.parse(
  `images:
  "node:*":
    command: [node]
    args: [server.js]
    env: {NODE_ENV: development, PORT: 8080}
    workingDir: /srv
  "python:3.12":
    command: [python3]
  "ghcr.io/acme/*":
    command: [/opt/acme/bin/run]
  "*":
    command: [/usr/bin/env]
`,
  'images.yaml',
)

describe('image map', () => {
  test('exact names win, then globs in file order, then the * fallback', () => {
    expect(map.resolve('python:3.12')!.pattern).toBe('python:3.12')
    expect(map.resolve('node:20-alpine')!.pattern).toBe('node:*')
    expect(map.resolve('ghcr.io/acme/api:v1')!.pattern).toBe('ghcr.io/acme/*')
    expect(map.resolve('busybox')!.pattern).toBe('*')
  })

  test('a pattern without a tag matches any tag or digest', () => {
    const m = ImageMap.parse('images:\n  redis: {command: [redis-server]}\n')
    expect(m.resolve('redis:7')!.pattern).toBe('redis')
    expect(m.resolve('redis@sha256:abc')!.pattern).toBe('redis')
    expect(m.resolve('redis-stack')).toBeUndefined()
    expect(imageCandidates('localhost:5000/app:1')).toEqual(['localhost:5000/app:1', 'localhost:5000/app'])
  })

  test('container command replaces ENTRYPOINT, args replace CMD; env values become strings', () => {
    const only = resolveProgram({name: 'c', image: 'node:20'}, map)
    expect(only).toMatchObject({ok: true, program: {argv: ['node', 'server.js'], env: {NODE_ENV: 'development', PORT: '8080'}, workingDir: '/srv'}})
    expect(resolveProgram({name: 'c', image: 'node:20', args: ['other.js']}, map)).toMatchObject({program: {argv: ['node', 'other.js']}})
    expect(resolveProgram({name: 'c', image: 'node:20', command: ['deno'], args: ['x']}, map)).toMatchObject({program: {argv: ['deno', 'x']}})
  })

  test('no command and no mapping: an error that says how to fix it', () => {
    const r = resolveProgram({name: 'web', image: 'nginx:1.25'}, new ImageMap())
    expect(r.ok).toBe(false)
    if (r.ok) return
    expect(r.message).toContain('container "web" has no command')
    expect(r.message).toContain('no --images file was given')
    expect(r.message).toContain('"nginx*"')
  })

  test('the imageID changes with what the image resolves to', () => {
    const a = resolveProgram({name: 'c', image: 'node:20'}, map)
    const b = resolveProgram({name: 'c', image: 'busybox'}, map)
    expect(a.ok && b.ok && a.program.imageID !== b.program.imageID).toBe(true)
  })

  test.each([
    ['images: [a, b]', 'expected a mapping with an "images" key'],
    ['nope: {}', 'expected a mapping with an "images" key'],
    ['images:\n  x: {command: []}', 'command must not be empty'],
    ['images:\n  x: {cmd: [a]}', 'unknown field "cmd"'],
    ['images:\n  x: {command: a, workingDir: rel}', 'workingDir must be an absolute path'],
    ['images:\n  x: {command: [{a: 1}]}', 'command[0]: expected a string'],
    ['images: {x: [', 'not valid YAML'],
  ])('rejects %j', (text, msg) => {
    expect(() => ImageMap.parse(text, 'f.yaml')).toThrow(msg)
  })
})

describe('the built-in image map', () => {
  const builtIn = defaultImageMap()
  const user = ImageMap.parse('images:\n  busybox: {command: [/opt/own/busybox]}\n', 'mine.yaml').over(builtIn)

  test("a base image has no ENTRYPOINT: the container's args are the command, the image's CMD without them", () => {
    expect(resolveProgram({name: 'c', image: 'busybox', args: ['sh', '-c', 'echo hi']}, builtIn)).toMatchObject({ok: true, program: {argv: ['sh', '-c', 'echo hi']}})
    expect(resolveProgram({name: 'c', image: 'docker.io/library/alpine:3.20'}, builtIn)).toMatchObject({ok: true, program: {argv: ['/bin/sh']}})
    const r = resolveProgram({name: 'c', image: 'python:3.12', args: ['python3', '-c', 'print(1)']}, builtIn)
    expect(r.ok && r.program.mapped).toBe(undefined)
  })

  test('a server image maps to its program, marked as built-in, with its files', () => {
    const r = resolveProgram({name: 'web', image: 'nginx:1.27', ports: [{containerPort: 8081}]}, builtIn)
    expect(r).toMatchObject({ok: true, program: {mapped: {pattern: 'nginx', builtIn: true}}})
    if (!r.ok) return
    expect(r.program.argv).toEqual(['nginx', '-e', 'stderr', '-p', '$(VNODE_IMAGE_DIR)', '-c', '$(VNODE_IMAGE_DIR)/nginx.conf', '-g', 'daemon off;'])
    expect(r.program.files?.['nginx.conf']).toContain('listen 8081;')
  })

  test('--images entries come before the built-in ones; what neither maps is still an error', () => {
    expect(resolveProgram({name: 'c', image: 'busybox:1.36'}, user)).toMatchObject({ok: true, program: {argv: ['/opt/own/busybox'], mapped: {pattern: 'busybox', builtIn: false}}})
    expect(resolveProgram({name: 'c', image: 'nginx'}, user)).toMatchObject({ok: true, program: {mapped: {builtIn: true}}})
    expect(resolveProgram({name: 'c', image: 'registry.example/app:1'}, user).ok).toBe(false)
  })

  test('a missing program: the message names the image, the program, the PATH and how to map it', () => {
    const r = resolveProgram({name: 'c', image: 'redis:7'}, builtIn)
    if (!r.ok) throw new Error(r.message)
    const m = missingProgramMessage({name: 'c', image: 'redis:7'}, r.program, '/usr/bin:/bin')
    expect(m).toBe(
      `image "redis:7" runs the program "redis-server" (entry "redis" of vnode's built-in image map), which is not installed: looked for "redis-server" in PATH=/usr/bin:/bin; ` +
        'install it, set command in the container spec, or map the image to another program with `kubectl vnode up --images FILE`, e.g. images: {"redis*": {command: ["/path/to/program"]}}',
    )
  })
})

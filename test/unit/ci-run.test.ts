import {afterAll, describe, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {delimiter, join, resolve} from 'node:path'

const ciRun = resolve('.ci/run')
const tmp = mkdtempSync(join(tmpdir(), 'vnode-ci-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

/** Every prerequisite .ci/run checks for, stubbed: it must never install (or start) anything for real. */
const Prerequisites = ['openssl', 'tmux', 'bwrap', 'nsenter', 'nginx', 'python3', 'busybox', 'iptables']
const CniPlugins = ['bridge', 'host-local', 'loopback', 'portmap']

/** The host's PATH as symlinks in one directory, without the programs named: a host that lacks them. */
function hostPathWithout(name: string, hidden: string[]): string {
  const dir = join(tmp, name, 'host')
  mkdirSync(dir, {recursive: true})
  for (const d of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const names = (() => {
      try {
        return readdirSync(d)
      } catch {
        return []
      }
    })()
    for (const n of names) if (!hidden.includes(n) && !existsSync(join(dir, n))) symlinkSync(join(d, n), join(dir, n))
  }
  return dir
}

interface Case {
  /** The jest JSON report `npm test` writes; undefined: an empty file. */
  report?: string
  /** `npm test`'s exit code. */
  exitCode: number
  /** Prerequisites this host lacks (neither stubbed nor on the host's PATH). */
  lacking?: string[]
  /** No CNI plugins in the CNI dir. */
  noCni?: boolean
  /** The conformance suite: run (as root, with apt-get) and its exit code, or not run. */
  conformance?: {uid: number; exitCode: number}
}

/**
 * .ci/run with a PATH of stubs before the host's: `npm ci` succeeds, `npm
 * test -- --json --outputFile=F` writes the report to F and exits with its
 * code; every prerequisite is there (a stub) unless the case says it lacks
 * it; apt-get records what it was asked to install (and whether policy-rc.d
 * was in place) and installs nothing; `id -u` says the case's uid, and
 * `node test/conformance/run.mjs` exits with the case's code (any other node
 * is the real one). The CNI dir and policy-rc.d are the case's own.
 */
async function runCi(name: string, c: Case) {
  const dir = join(tmp, name)
  const bin = join(dir, 'bin')
  const cni = join(dir, 'cni')
  mkdirSync(bin, {recursive: true})
  mkdirSync(cni, {recursive: true})
  const stub = (path: string, body: string) => {
    writeFileSync(path, `#!/bin/sh\n${body}\n`)
    chmodSync(path, 0o755)
  }
  if (c.report !== undefined) writeFileSync(join(dir, 'report.json'), c.report)
  stub(
    join(bin, 'npm'),
    [
      '[ "$1" = ci ] && exit 0',
      'for a in "$@"; do case "$a" in --outputFile=*) out="${a#--outputFile=}";; esac; done',
      c.report === undefined ? ': > "$out"' : `cp ${JSON.stringify(join(dir, 'report.json'))} "$out"`,
      `exit ${c.exitCode}`,
    ].join('\n'),
  )
  const lacking = c.lacking ?? []
  for (const p of Prerequisites) if (!lacking.includes(p)) stub(join(bin, p), 'exit 0')
  if (!c.noCni) for (const p of CniPlugins) stub(join(cni, p), 'exit 0')
  const policy = join(dir, 'policy-rc.d')
  stub(join(bin, 'apt-get'), `echo "$* policy=$([ -x ${JSON.stringify(policy)} ] && echo yes || echo no)" >> ${JSON.stringify(join(dir, 'apt-get.log'))}`)
  const conformance = c.conformance ?? {uid: 0, exitCode: 0}
  stub(join(bin, 'id'), `[ "$1" = -u ] && { echo ${conformance.uid}; exit 0; }; exit 1`)
  stub(
    join(bin, 'node'),
    [
      `if [ "$1" = test/conformance/run.mjs ]; then echo "$*" >> ${JSON.stringify(join(dir, 'conformance.log'))}; exit ${conformance.exitCode}; fi`,
      `exec ${JSON.stringify(process.execPath)} "$@"`,
    ].join('\n'),
  )
  const host = hostPathWithout(name, [...lacking, 'apt-get', 'id', 'npm', 'node'])
  const env = {
    ...process.env,
    PATH: `${bin}:${host}`,
    VNODE_CI_CNI_DIR: cni,
    VNODE_CI_POLICY_RC: policy,
    VNODE_CONFORMANCE: c.conformance ? '1' : '0',
  }
  const r = await execa(ciRun, [], {env, reject: false, timeout: 30_000})
  const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8').trim().split('\n') : [])
  return {exitCode: r.exitCode, last: r.stdout.trim().split('\n').at(-1), stdout: r.stdout, aptGet: read('apt-get.log'), conformance: read('conformance.log'), policyLeft: existsSync(policy)}
}

const jestReport = (passed: number, failed: number) => JSON.stringify({numPassedTests: passed, numFailedTests: failed, numRuntimeErrorTestSuites: 0})

describe('.ci/run: the counts', () => {
  test('a failing test run fails CI, with the counts as the last line', async () => {
    expect(await runCi('one-failed', {report: jestReport(389, 1), exitCode: 1})).toMatchObject({exitCode: 1, last: '389 passed, 1 failed', aptGet: []})
  })

  test('a passing run passes', async () => {
    const r = await runCi('all-passed', {report: jestReport(5, 0), exitCode: 0})
    expect(r).toMatchObject({exitCode: 0, last: '5 passed, 0 failed', aptGet: [], conformance: []})
    // Asked not to, it says it skipped the conformance suite, which otherwise runs where it can.
    expect(r.stdout).toContain('ci: conformance skipped')
  })

  test('a report that cannot be read fails CI, even when the run said success', async () => {
    expect(await runCi('no-report', {exitCode: 0})).toMatchObject({exitCode: 1, last: '0 passed, 1 failed'})
    expect(await runCi('garbled-report', {report: '{"numPassed', exitCode: 0})).toMatchObject({exitCode: 1, last: '0 passed, 1 failed'})
  })

  test('the counts say failed while the run said success: CI fails', async () => {
    expect(await runCi('counts-failed', {report: jestReport(3, 2), exitCode: 0})).toMatchObject({exitCode: 1, last: '3 passed, 2 failed'})
  })

  test('a run that failed outside any test (e.g. typecheck) fails CI with its own status', async () => {
    expect(await runCi('typecheck-failed', {exitCode: 2})).toMatchObject({exitCode: 2, last: '0 passed, 1 failed'})
  })

  test('each failed test is named, with the first lines of its failure, just above the counts', async () => {
    const message = ['\x1b[31mError: timed out waiting for dev to say serving v1 on\x1b[39m', ...Array.from({length: 30}, (_, i) => `    at line ${i + 1}`)].join('\n')
    const report = JSON.stringify({
      numPassedTests: 1,
      numFailedTests: 1,
      numRuntimeErrorTestSuites: 1,
      testResults: [
        {
          name: join(process.cwd(), 'test/e2e/cli-dev.test.ts'),
          status: 'failed',
          assertionResults: [
            {fullName: 'kubectl vnode dev a save restarts it', status: 'failed', failureMessages: [message]},
            {fullName: 'kubectl vnode dev bad inputs', status: 'passed', failureMessages: []},
          ],
        },
        {name: join(process.cwd(), 'test/e2e/broken.test.ts'), status: 'failed', message: 'Test suite failed to run\n\nSyntaxError: nope', assertionResults: []},
        {name: join(process.cwd(), 'test/e2e/fine.test.ts'), status: 'passed', assertionResults: [{fullName: 'fine', status: 'passed', failureMessages: []}]},
      ],
    })
    const r = await runCi('failures-listed', {report, exitCode: 1})
    const lines = r.stdout.trim().split('\n')
    const listed = lines.slice(lines.findIndex((l) => l.startsWith('ci: failed: ')))
    expect(listed).toEqual([
      'ci: failed: test/e2e/cli-dev.test.ts > kubectl vnode dev a save restarts it',
      '    Error: timed out waiting for dev to say serving v1 on',
      ...Array.from({length: 15}, (_, i) => `        at line ${i + 1}`),
      'ci: failed: test/e2e/broken.test.ts (the file failed outside its tests)',
      '    Test suite failed to run',
      '    SyntaxError: nope',
      '1 passed, 2 failed',
    ])
    expect(r.exitCode).toBe(1)
  })

  test('a suite that failed to run counts as a failure', async () => {
    const report = JSON.stringify({numPassedTests: 7, numFailedTests: 0, numRuntimeErrorTestSuites: 2})
    expect(await runCi('runtime-error', {report, exitCode: 1})).toMatchObject({exitCode: 1, last: '7 passed, 2 failed'})
  })
})

describe('.ci/run: the conformance suite counts as one more test', () => {
  test('passed: one more passed, CI passes; it ran with its output dir', async () => {
    const r = await runCi('conformance-passed', {report: jestReport(5, 0), exitCode: 0, conformance: {uid: 0, exitCode: 0}})
    expect(r).toMatchObject({exitCode: 0, last: '6 passed, 0 failed', conformance: ['test/conformance/run.mjs --out .conformance']})
    expect(r.stdout).toMatch(/^ci: conformance passed in \d+s$/m)
  })

  test('failed: one more failed, CI fails though every other test passed', async () => {
    const r = await runCi('conformance-failed', {report: jestReport(5, 0), exitCode: 0, conformance: {uid: 0, exitCode: 1}})
    expect(r).toMatchObject({exitCode: 1, last: '5 passed, 1 failed'})
    expect(r.stdout).toMatch(/^ci: conformance failed in \d+s$/m)
  })

  test("failed beside failed tests: both counted; the exit is the test run's", async () => {
    expect(await runCi('both-failed', {report: jestReport(4, 1), exitCode: 1, conformance: {uid: 0, exitCode: 1}})).toMatchObject({exitCode: 1, last: '4 passed, 2 failed'})
  })

  test('not root: skipped, not counted, and said', async () => {
    const r = await runCi('conformance-not-root', {report: jestReport(5, 0), exitCode: 0, conformance: {uid: 1000, exitCode: 0}})
    expect(r).toMatchObject({exitCode: 0, last: '5 passed, 0 failed', conformance: []})
    expect(r.stdout).toContain('ci: conformance skipped (it needs root and apt-get')
  })
})

describe('.ci/run: the prerequisites', () => {
  test('everything there: apt-get is never run', async () => {
    expect((await runCi('all-there', {report: jestReport(1, 0), exitCode: 0})).aptGet).toEqual([])
  })

  test('python3 missing: apt-get installs the prerequisites with it, under a policy-rc.d that starts no service, removed after', async () => {
    const r = await runCi('no-python3', {report: jestReport(1, 0), exitCode: 0, lacking: ['python3']})
    expect(r.aptGet).toEqual(['update -qq policy=yes', 'install -y -qq openssl tmux bubblewrap util-linux nginx python3 busybox-static policy=yes'])
    expect(r.policyLeft).toBe(false)
    expect(r.exitCode).toBe(0)
  })

  test('bwrap missing: the same install', async () => {
    const r = await runCi('no-bwrap', {report: jestReport(1, 0), exitCode: 0, lacking: ['bwrap']})
    expect(r.aptGet).toEqual(['update -qq policy=yes', 'install -y -qq openssl tmux bubblewrap util-linux nginx python3 busybox-static policy=yes'])
  })

  test('busybox missing (a fresh Debian): the same install, busybox-static with it', async () => {
    const r = await runCi('no-busybox', {report: jestReport(1, 0), exitCode: 0, lacking: ['busybox']})
    expect(r.aptGet).toEqual(['update -qq policy=yes', 'install -y -qq openssl tmux bubblewrap util-linux nginx python3 busybox-static policy=yes'])
  })

  test("no CNI plugins, or no iptables: apt-get installs the pod network's packages", async () => {
    expect((await runCi('no-cni', {report: jestReport(1, 0), exitCode: 0, noCni: true})).aptGet).toEqual(['update -qq policy=no', 'install -y -qq containernetworking-plugins iptables policy=no'])
    expect((await runCi('no-iptables', {report: jestReport(1, 0), exitCode: 0, lacking: ['iptables']})).aptGet).toEqual([
      'update -qq policy=no',
      'install -y -qq containernetworking-plugins iptables policy=no',
    ])
  })
})

import {afterAll, describe, expect, test} from '@jest/globals'
import {execa} from 'execa'
import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'

const ciRun = resolve('.ci/run')
const tmp = mkdtempSync(join(tmpdir(), 'vnode-ci-'))
afterAll(() => rmSync(tmp, {recursive: true, force: true}))

/**
 * A PATH whose `npm` stands in for the test run: `npm ci` succeeds, `npm test
 * -- --json --outputFile=F` writes `report` to F (unless undefined) and exits
 * with `exitCode`. openssl and tmux stubs keep .ci/run from reaching for apt-get.
 */
function fakePath(name: string, report: string | undefined, exitCode: number): string {
  const dir = join(tmp, name)
  mkdirSync(dir, {recursive: true})
  const stub = (bin: string, body: string) => {
    writeFileSync(join(dir, bin), `#!/bin/sh\n${body}\n`)
    chmodSync(join(dir, bin), 0o755)
  }
  if (report !== undefined) writeFileSync(join(dir, 'report.json'), report)
  stub(
    'npm',
    [
      '[ "$1" = ci ] && exit 0',
      'for a in "$@"; do case "$a" in --outputFile=*) out="${a#--outputFile=}";; esac; done',
      report === undefined ? ': > "$out"' : `cp ${JSON.stringify(join(dir, 'report.json'))} "$out"`,
      `exit ${exitCode}`,
    ].join('\n'),
  )
  stub('openssl', 'exit 0')
  stub('tmux', 'exit 0')
  return `${dir}:${process.env.PATH}`
}

async function runCi(name: string, report: string | undefined, exitCode: number) {
  // VNODE_CONFORMANCE=0: the conformance suite (a real kubelet, minutes) is not what these cases are about.
  const r = await execa(ciRun, [], {env: {...process.env, PATH: fakePath(name, report, exitCode), VNODE_CONFORMANCE: '0'}, reject: false, timeout: 30_000})
  return {exitCode: r.exitCode, last: r.stdout.trim().split('\n').at(-1), stdout: r.stdout}
}

const jestReport = (passed: number, failed: number) => JSON.stringify({numPassedTests: passed, numFailedTests: failed, numRuntimeErrorTestSuites: 0})

describe('.ci/run', () => {
  test('a failing test run fails CI, with the counts as the last line', async () => {
    expect(await runCi('one-failed', jestReport(389, 1), 1)).toMatchObject({exitCode: 1, last: '389 passed, 1 failed'})
  })

  test('a passing run passes', async () => {
    const r = await runCi('all-passed', jestReport(5, 0), 0)
    expect(r).toMatchObject({exitCode: 0, last: '5 passed, 0 failed'})
    // Asked not to, it says it skipped the conformance suite, which otherwise runs where it can.
    expect(r.stdout).toContain('ci: conformance skipped')
  })

  test('a report that cannot be read fails CI, even when the run said success', async () => {
    expect(await runCi('no-report', undefined, 0)).toMatchObject({exitCode: 1, last: '0 passed, 1 failed'})
    expect(await runCi('garbled-report', '{"numPassed', 0)).toMatchObject({exitCode: 1, last: '0 passed, 1 failed'})
  })

  test('the counts say failed while the run said success: CI fails', async () => {
    expect(await runCi('counts-failed', jestReport(3, 2), 0)).toMatchObject({exitCode: 1, last: '3 passed, 2 failed'})
  })

  test('a run that failed outside any test (e.g. typecheck) fails CI with its own status', async () => {
    const r = await runCi('typecheck-failed', undefined, 2)
    expect(r).toMatchObject({exitCode: 2, last: '0 passed, 1 failed'})
  })
})

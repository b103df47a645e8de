import {describe, expect, test} from '@jest/globals'
import {readFileSync} from 'node:fs'
import {FullSizes, goalList, judge, readmeTable, ReadmeMarkers, ResultsFiles, runKind, withReadmeTable} from '../../bench/goals.mjs'

type Row = {scenario: string; metric: string; value: number | string; unit: string}
type Goal = {scenario: 'goal'; metric: string; value: 'met' | 'missed' | 'not measured'; unit: string}
const judged = (rows: Row[], notes: Row[] = []): Goal[] => judge(rows, notes, FullSizes) as Goal[]
const byName = (goals: Goal[], part: string) => goals.find((g) => g.metric.includes(part))!

describe('bench goals', () => {
  test('a run without figures still has one row per goal, each not measured, naming the missing figure and the reason the run gave', () => {
    const notes = [{scenario: 'note', metric: 'kubelet not run', value: 'the reference kubelet cannot run here: it needs root', unit: ''}]
    const goals = judged([], notes)
    expect(goals).toHaveLength(goalList(FullSizes).length)
    expect(goals.every((g) => g.value === 'not measured')).toBe(true)
    const kubelet = byName(goals, 'as users run it: start p99 <= 0.2x the reference kubelet')
    expect(kubelet.unit).toBe('no kubelet-start-100-vnode-default p99/kubelet, kubelet-start-100-vnode-default p99, kubelet-start-100 p99: the reference kubelet cannot run here: it needs root')
    expect(byName(goals, 'plain start p99 <= 1.5x the floor').unit).toMatch(/^no start-100 p99\/floor, start-100 p99, floor-100 p99: its scenario was not in this run$/)
  })

  test('met and missed follow the figures, and the text gives the figures it was judged on', () => {
    const rows = (p99: number): Row[] => [
      {scenario: 'start-100', metric: 'p99/floor', value: Math.round((p99 / 800) * 100) / 100, unit: 'ratio'},
      {scenario: 'start-100', metric: 'p99', value: p99, unit: 'ms'},
      {scenario: 'floor-100', metric: 'p99', value: 800, unit: 'ms'},
    ]
    const met = byName(judged(rows(1200)), 'plain start p99 <= 1.5x the floor')
    expect(met).toEqual({scenario: 'goal', metric: 'plain start p99 <= 1.5x the floor (100 pods, same run)', value: 'met', unit: "1.5x: p99 1200 ms against the floor's 800 ms"})
    const missed = byName(judged(rows(1208)), 'plain start p99 <= 1.5x the floor')
    expect(missed.value).toBe('missed')
    expect(missed.unit).toMatch(/^1\.51x: p99 1208 ms against the floor's 800 ms: /)
    // The absolute goal says whether the floor itself is under it, from the figures.
    expect(byName(judged(rows(1200)), 'plain start p99 <= 1 s').unit).toMatch(/the floor's p99 is 800 ms: the rest is vnode's$/)
    const slowFloor = rows(1200).map((r) => (r.scenario === 'floor-100' ? {...r, value: 1100} : r))
    expect(byName(judged(slowFloor), 'plain start p99 <= 1 s').unit).toMatch(/the floor's own p99 is 1100 ms on this machine/)
  })

  test('a ratio is judged from its two figures, not from its row rounded to two decimals', () => {
    const rows: Row[] = [
      {scenario: 'kubelet-delete-burst-100-vnode-default', metric: 'p99/kubelet', value: 0.3, unit: 'ratio'},
      {scenario: 'kubelet-delete-burst-100-vnode-default', metric: 'p99', value: 4417.07, unit: 'ms'},
      {scenario: 'kubelet-delete-burst-100', metric: 'p99', value: 14505.93, unit: 'ms'},
    ]
    const goal = byName(judged(rows), 'the node as users run it: delete burst p99 <= 0.3x')
    expect(goal.value).toBe('missed')
    expect(goal.unit).toMatch(/^0\.305x: p99 4417 ms against the kubelet's 14506 ms: /)
  })

  test("the default node's start goals show the first (cold) round beside the median where the run has it, and judge the median only", () => {
    const rows: Row[] = [
      {scenario: 'start-100-default', metric: 'p99/plain', value: 1.2, unit: 'ratio'},
      {scenario: 'start-100-default', metric: 'p99', value: 1200, unit: 'ms'},
      {scenario: 'start-100-plain', metric: 'p99', value: 1000, unit: 'ms'},
    ]
    const goal = 'the node as users run it: start p99 <= 1.3x plain'
    expect(byName(judged(rows), goal)).toMatchObject({value: 'met', unit: "1.2x: p99 1200 ms against plain's 1000 ms"})
    const cold = byName(judged([...rows, {scenario: 'start-100-default', metric: 'p99 cold/plain', value: 2.5, unit: 'ratio'}]), goal)
    expect(cold).toMatchObject({value: 'met', unit: "1.2x: p99 1200 ms against plain's 1000 ms (the median of the rounds; the first, cold, 2.5x)"})
  })

  test('a run that aborted says so on the goals it did not measure', () => {
    const goals = judged([], [{scenario: 'note', metric: 'aborted', value: 'aborted: the API server went away', unit: ''}])
    expect(byName(goals, 'at most 3 API writes').unit).toMatch(/: aborted: the API server went away$/)
  })

  test('only a full run writes results.json; --quick and --only runs have files of their own', () => {
    expect(runKind({quick: false, only: undefined, startPods: false})).toBe('full')
    expect(runKind({quick: true, only: undefined, startPods: false})).toBe('quick')
    expect(runKind({quick: false, only: ['start'], startPods: false})).toBe('partial')
    expect(runKind({quick: false, only: undefined, startPods: true})).toBe('partial')
    expect(ResultsFiles.full).toBe('results.json')
    expect(new Set(Object.values(ResultsFiles)).size).toBe(3)
  })

  test("the README's table lists every goal of a results file, between its markers, and nothing else changes", () => {
    const results = [{scenario: 'run', metric: 'full', value: '', unit: ''}, ...judged([{scenario: 'delete-one-at-a-time', metric: 'p99', value: 90, unit: 'ms'}])]
    const table = readmeTable(results)
    expect(table.split('\n').filter((l: string) => l.startsWith('| ') && !l.startsWith('| goal'))).toHaveLength(goalList(FullSizes).length)
    expect(table).toContain('| delete p99 < 0.5 s after the process exits (one deletion at a time) | met | p99 90 ms |')
    const readme = `# x\n\nbefore\n${ReadmeMarkers.begin}\nold table\n${ReadmeMarkers.end}\nafter\n`
    const next = withReadmeTable(readme, results)
    expect(next).toBe(`# x\n\nbefore\n${ReadmeMarkers.begin}\n\n${table}\n\n${ReadmeMarkers.end}\nafter\n`)
    expect(() => withReadmeTable('# no markers\n', results)).toThrow(/has no/)
  })

  test("the README's goal table is the one bench/results.json gives, and that file is a full run judged by today's goals", () => {
    const results = JSON.parse(readFileSync('bench/results.json', 'utf8')) as (Row & {size?: typeof FullSizes})[]
    const run = results.find((r) => r.scenario === 'run')
    expect(run?.metric).toBe('full')
    const rows = results.filter((r) => !['run', 'goal', 'note'].includes(r.scenario))
    const notes = results.filter((r) => r.scenario === 'note')
    expect(results.filter((r) => r.scenario === 'goal')).toEqual(judge(rows, notes, run!.size))
    const readme = readFileSync('README.md', 'utf8')
    expect(readme.slice(readme.indexOf(ReadmeMarkers.begin), readme.indexOf(ReadmeMarkers.end) + ReadmeMarkers.end.length)).toBe(
      `${ReadmeMarkers.begin}\n\n${readmeTable(results)}\n\n${ReadmeMarkers.end}`,
    )
  })
})

// The conformance report: Markdown for people, JSON for tools, and the headline
//   conformance: N/M identical, D identical apart from documented differences (id: specs; ...), F different
// F counts the specs that differ and the ones that failed to run (said apart).
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

const cell = (v) =>
  String(v ?? '')
    .replace(/\|/g, '\\|')
    .replace(/\n/g, '\\n')
    .slice(0, 160)

/** Which documented differences the `documented` specs leaned on, each with the specs it covered. */
export function excusesUsed(results) {
  const by = new Map()
  for (const r of results.filter((x) => x.verdict === 'documented')) for (const id of new Set(r.diffs.map((d) => d.documented))) by.set(id, [...(by.get(id) ?? []), r.name])
  return by
}

export function headline(results) {
  const count = (v) => results.filter((r) => r.verdict === v).length
  const used = [...excusesUsed(results)].map(([id, specs]) => `${id}: ${specs.join(', ')}`)
  const failed = count('failed')
  const different = count('different') + failed
  return `conformance: ${count('identical')}/${results.length} identical, ${count('documented')} identical apart from documented differences${used.length ? ` (${used.join('; ')})` : ''}, ${different} different${failed ? ` (${failed} failed to run)` : ''}`
}

const at = (d) => (d.at === undefined ? '' : `${d.path.startsWith('status-deleting') ? '+' : ''}${d.at / 1000} s`)

export async function writeReport({outDir, results, differences, seconds, nodes, load}) {
  await mkdir(outDir, {recursive: true})
  const line = headline(results)
  const bad = results.filter((r) => r.verdict === 'different' || r.verdict === 'failed')
  const used = (id) => results.some((r) => r.diffs.some((x) => x.documented === id))
  const unused = differences.filter((d) => !used(d.id))
  if (unused.length > 0) console.error(`conformance: entries no spec needed: ${unused.map((d) => d.id).join(', ')}`)
  const loadText = load ? `load (1-minute average) ${load.min}-${load.max}, mean ${load.mean}, on ${load.cpus} CPUs` : 'load not measured'
  const md = [
    '# Conformance: vnode against the reference kubelet',
    '',
    `${line}`,
    '',
    `${seconds} s; ${loadText}. Status samples: seconds after the first container start, \`+\` after the delete call.`,
    '',
    '| spec | verdict | load factor | differences |',
    '| --- | --- | --- | --- |',
    ...results.map((r) => `| ${r.name} | ${r.verdict} | ${r.factor} | ${cell([...new Set(r.diffs.map((d) => (d.documented ? `${d.path} [${d.documented}]` : `**${d.path}**`)))].join('; '))} |`),
    '',
    '## Differences that fail',
    '',
    ...bad.flatMap((r) => [
      `### ${r.name} (${r.verdict})`,
      '',
      '| difference | kubelet | vnode | sample |',
      '| --- | --- | --- | --- |',
      ...r.diffs
        .filter((d) => !d.documented)
        .map(
          (d) =>
            `| ${cell(d.path)} | ${cell(d.kubelet)} | ${cell(d.vnode)}${d.expected === undefined ? '' : ` (expected ${cell(d.expected)})`}${d.tolerance === undefined ? '' : ` (tolerance ${d.tolerance} ms)`} | ${at(d)} |`,
        ),
      '',
    ]),
    '## Documented differences seen in this run',
    '',
    ...differences.filter((d) => used(d.id)).map((d) => `- **${d.id}** (${d.kind}): ${d.reason}`),
    '',
    '## Entries no spec needed in this run',
    '',
    // A "not yet fixed" entry that stops being needed is a fix to confirm over a few runs, then to delete.
    ...unused.map((d) => `- **${d.id}** (${d.kind})`),
    '',
  ].join('\n')
  await writeFile(join(outDir, 'conformance.md'), md)
  await writeFile(join(outDir, 'conformance.json'), JSON.stringify({line, seconds, load, nodes, unusedDifferences: unused.map((d) => d.id), results}, null, 1))
  // The failing rows and the load go to the log too: CI keeps the log, not the report.
  console.error(`conformance: ${seconds} s; ${loadText}`)
  for (const r of bad) {
    console.error(`conformance: ${r.name} ${r.verdict}`)
    for (const d of r.diffs.filter((x) => !x.documented))
      console.error(`  ${d.path}${d.at === undefined ? '' : ` at ${at(d)}`}: kubelet ${cell(d.kubelet)}; vnode ${cell(d.vnode)}${d.expected === undefined ? '' : ` (expected ${cell(d.expected)})`}`)
  }
  console.error(`conformance: report in ${join(outDir, 'conformance.md')} and conformance.json`)
  return {line, ok: bad.length === 0, total: results.length}
}

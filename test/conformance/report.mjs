// The conformance report: Markdown for people, JSON for tools, and the summary line.
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

const cell = (v) =>
  String(v ?? '')
    .replace(/\|/g, '\\|')
    .replace(/\n/g, ' ')
    .slice(0, 160)

export async function writeReport({outDir, results, differences, seconds, nodes}) {
  await mkdir(outDir, {recursive: true})
  const identical = results.filter((r) => r.verdict === 'identical').length
  const failed = results.filter((r) => r.verdict === 'different')
  const used = new Set(results.flatMap((r) => r.diffs.map((d) => d.documented).filter(Boolean)))
  const line = `conformance: ${identical}/${results.length} specs identical, ${used.size} documented differences`
  const timingOnly = results.filter((r) => r.diffs.length > 0 && r.diffs.every((d) => d.path.startsWith('time '))).length
  const md = [
    '# Conformance: vnode against the reference kubelet',
    '',
    `${line}; ${timingOnly} specs differ in timing only; ${failed.length} specs with undocumented differences; ${seconds} s.`,
    '',
    '| spec | verdict | differences |',
    '| --- | --- | --- |',
    ...results.map((r) => `| ${r.name} | ${r.verdict} | ${cell(r.diffs.map((d) => (d.documented ? `${d.path} [${d.documented}]` : `**${d.path}**`)).join('; '))} |`),
    '',
    '## Undocumented differences',
    '',
    ...failed.flatMap((r) => [
      `### ${r.name}`,
      '',
      '| difference | kubelet | vnode | first seen |',
      '| --- | --- | --- | --- |',
      ...r.diffs.filter((d) => !d.documented).map((d) => `| ${cell(d.path)} | ${cell(d.kubelet)} | ${cell(d.vnode)} | ${d.at === undefined ? '' : `${d.at / 1000} s`} |`),
      '',
    ]),
    '## Documented differences seen in this run',
    '',
    ...differences.filter((d) => used.has(d.id)).map((d) => `- **${d.id}**: ${d.reason}`),
    '',
  ].join('\n')
  await writeFile(join(outDir, 'conformance.md'), md)
  await writeFile(join(outDir, 'conformance.json'), JSON.stringify({line, seconds, nodes, results}, null, 1))
  console.error(`conformance: report in ${join(outDir, 'conformance.md')} and conformance.json`)
  return {line, ok: failed.length === 0, identical, timingOnly, total: results.length, documented: used.size}
}

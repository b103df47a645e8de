import {Config} from '@oclif/core'
import type {CompletionCommand, CompletionFlag} from './cli/completion.js'

/** `kubectl_complete-vnode WORDS...`: what kubectl runs to complete `kubectl vnode WORDS...` (cli/completion.ts). */
export async function completionMain(args: string[]): Promise<void> {
  process.env.NODE_ENV = 'production'
  const config = await Config.load(import.meta.url)
  const commands: CompletionCommand[] = config.commands
    .filter((c) => !c.hidden)
    .map((c) => ({
      path: c.id.split(':'),
      summary: c.summary ?? c.description,
      flags: c.flags as Record<string, CompletionFlag>,
      takesPods: Object.keys(c.args ?? {}).some((a) => a === 'pod' || a === 'pods'),
    }))
  const {complete, formatCompletion} = await import('./cli/completion.js')
  const {clusterCompletionSources} = await import('./cli/completion-sources.js')
  const topics = new Map(config.topics.map((t) => [t.name.split(':').join(' '), t.description ?? '']))
  process.stdout.write(formatCompletion(await complete(commands, args, clusterCompletionSources, topics)))
}

/**
 * A rich terminal UI only when a person is there to see it: stdin and stdout
 * are terminals and this is not CI (the Gatsby / Shopify CLI rule). Otherwise
 * plain lines or JSON.
 */
export function isInteractive(stdout: NodeJS.WriteStream = process.stdout, stdin: NodeJS.ReadStream = process.stdin): boolean {
  const ci = process.env.CI && process.env.CI !== 'false' && process.env.CI !== '0'
  return Boolean(stdout.isTTY && stdin.isTTY && !ci)
}

/** The alternate screen, as full-screen terminal tools use it: the shell's screen comes back intact on exit. */
export const EnterAltScreen = '\u001b[?1049h\u001b[H'
export const LeaveAltScreen = '\u001b[?1049l'

/**
 * An error whose message is meant for the user as it is: the CLI prints
 * `error: <message>` on stderr and exits 1, with no stack trace.
 */
export class UserError extends Error {
  override name = 'UserError'
}

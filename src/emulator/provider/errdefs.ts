/**
 * Errors classified by behaviour, not by message. A provider throws these;
 * the pod core and the kubelet API decide what to do from the class alone
 * (NotFound still completes a deletion; the API maps NotFound to 404,
 * InvalidInput to 400). Classification walks `cause`, so wrapping keeps it.
 */
export type ErrorKind = 'NotFound' | 'InvalidInput' | 'Conflict' | 'Unavailable'

export class ClassifiedError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options?: {cause?: unknown},
  ) {
    super(message, options)
    this.name = `${kind}Error`
  }
}

export const notFound = (message: string, cause?: unknown) => new ClassifiedError('NotFound', message, {cause})
export const invalidInput = (message: string, cause?: unknown) => new ClassifiedError('InvalidInput', message, {cause})
export const unavailable = (message: string, cause?: unknown) => new ClassifiedError('Unavailable', message, {cause})

export function kindOf(error: unknown): ErrorKind | undefined {
  for (let e = error, depth = 0; e && depth < 16; e = (e as {cause?: unknown}).cause, depth++) {
    if (e instanceof ClassifiedError) return e.kind
  }
  return undefined
}

export const isNotFound = (e: unknown) => kindOf(e) === 'NotFound'
export const isInvalidInput = (e: unknown) => kindOf(e) === 'InvalidInput'

/** HTTP status for the kubelet API: NotFound 404, InvalidInput 400, Conflict 409, Unavailable 503, else 500. */
export function httpStatusOf(error: unknown): number {
  return {NotFound: 404, InvalidInput: 400, Conflict: 409, Unavailable: 503}[kindOf(error) ?? ('' as ErrorKind)] ?? 500
}

/** Classifies API errors by their HTTP status, never by message text. */

export function statusCode(error: unknown): number | undefined {
  const e = error as {code?: unknown; statusCode?: unknown}
  if (typeof e?.code === 'number') return e.code
  if (typeof e?.statusCode === 'number') return e.statusCode
  return undefined
}

export const isNotFound = (e: unknown) => statusCode(e) === 404
export const isConflict = (e: unknown) => statusCode(e) === 409
export const isAlreadyExists = (e: unknown) => statusCode(e) === 409
/** 410 Gone: an error, or a watch ERROR event's Status (a resourceVersion too old to watch from). */
export const isGone = (e: unknown) => statusCode(e) === 410

/** The fields an Invalid (422) error names, from its Status details. */
function invalidFields(error: unknown): string[] {
  let body = (error as {body?: unknown})?.body
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body)
    } catch {
      return []
    }
  }
  const causes = (body as {details?: {causes?: Array<{field?: string}>}} | undefined)?.details?.causes ?? []
  return causes.map((c) => c.field ?? '')
}

/**
 * A write carrying metadata.uid as its precondition met an object of another
 * uid under the same name: 409 Conflict for some resources, 422 Invalid
 * (metadata.uid is immutable) for others, such as a Node's status.
 */
export const isUidMismatch = (e: unknown) => isConflict(e) || (statusCode(e) === 422 && invalidFields(e).includes('metadata.uid'))

/** A short, human description of an API error: `NotFound: pods "x" not found`. */
export function describeApiError(error: unknown): string {
  const e = error as {body?: unknown; message?: string; name?: string; type?: string}
  // node-fetch's words for a request ended by its signal; the only signal on a request is --request-timeout.
  if (e?.type === 'aborted' || e?.name === 'AbortError' || e?.name === 'TimeoutError') return 'no answer within --request-timeout'
  let body = e?.body
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body)
    } catch {
      /* keep the text */
    }
  }
  const status = body as {reason?: string; message?: string} | undefined
  if (status && typeof status === 'object' && status.message) return status.reason ? `${status.reason}: ${status.message}` : status.message
  const code = statusCode(error)
  return code ? `HTTP ${code}: ${e?.message ?? ''}`.trim() : (e?.message ?? String(error))
}

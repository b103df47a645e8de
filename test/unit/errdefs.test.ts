import {describe, expect, test} from '@jest/globals'
import {httpStatusOf, invalidInput, isInvalidInput, isNotFound, kindOf, notFound} from '../../src/emulator/provider/errdefs.js'

describe('errdefs', () => {
  test('classifies by class, including through a cause chain', () => {
    const wrapped = new Error('deleting pod failed', {cause: notFound('pod default/x not known')})
    expect(isNotFound(wrapped)).toBe(true)
    expect(isInvalidInput(wrapped)).toBe(false)
    expect(kindOf(new Error('not found'))).toBeUndefined()
  })

  test('maps kinds to HTTP status codes', () => {
    expect(httpStatusOf(notFound('x'))).toBe(404)
    expect(httpStatusOf(invalidInput('x'))).toBe(400)
    expect(httpStatusOf(new Error('boom'))).toBe(500)
  })
})

import {describe, expect, test} from '@jest/globals'
import {expand, mappingFor} from '../../src/emulator/runtime/env/expansion.js'

describe('$(VAR) expansion (Kubernetes rules)', () => {
  const m = mappingFor(
    new Map([
      ['A', 'alpha'],
      ['EMPTY', ''],
    ]),
    {B: 'beta'},
  )
  test.each([
    ['$(A)', 'alpha'],
    ['x$(A)y$(B)z', 'xalphaybetaz'],
    ['$(EMPTY)-', '-'],
    ['$(MISSING)', '$(MISSING)'],
    ['$$(A)', '$(A)'],
    ['$$$(A)', '$alpha'],
    ['$$', '$'],
    ['$A', '$A'],
    ['$(A', '$(A'],
    ['tail$', 'tail$'],
    ['$()', '$()'],
    ['', ''],
  ])('%j -> %j', (input, want) => {
    expect(expand(input, m)).toBe(want)
  })

  test('earlier contexts win', () => {
    expect(expand('$(K)', mappingFor({K: 'first'}, {K: 'second'}))).toBe('first')
  })
})

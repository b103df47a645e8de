import {expect, test} from '@jest/globals'
import {dialAttempts} from '../../src/emulator/runtime/network/port-dial.js'

// The port-forward helper's first stderr line: `ok`, or each family's failed attempt.
test("the dial helper's verdict: ok, or the failed attempts per family in order", () => {
  expect(dialAttempts('ok')).toBeUndefined()
  expect(dialAttempts('ok\n')).toBeUndefined()
  expect(dialAttempts('4 ECONNREFUSED 6 EADDRNOTAVAIL')).toEqual([
    {family: 4, code: 'ECONNREFUSED'},
    {family: 6, code: 'EADDRNOTAVAIL'},
  ])
  expect(dialAttempts('4 ETIMEDOUT')).toEqual([{family: 4, code: 'ETIMEDOUT'}])
  // A helper that died before saying anything (nsenter refused the namespace) is still a failed dial.
  expect(dialAttempts('')).toEqual([{family: 4, code: 'EIO'}])
  expect(dialAttempts("nsenter: reassociate to namespace 'ns/net' failed: Invalid argument")).toEqual([{family: 4, code: "nsenter: reassociate to namespace 'ns/net' failed: Invalid argument"}])
})

import {expect, test} from '@jest/globals'
import {LineBatch} from '../../src/ui/plain.js'

const sink = () => {
  const writes: string[] = []
  return {writes, out: {write: (s: string) => writes.push(s)} as unknown as NodeJS.WritableStream}
}

test("the lines of one turn of the event loop go out in one write, in order, at the turn's end", async () => {
  const {writes, out} = sink()
  const batch = new LineBatch(out)
  batch.push('a\n')
  batch.push('b\n')
  expect(writes).toEqual([])
  await new Promise((r) => setImmediate(r))
  expect(writes).toEqual(['a\nb\n'])
  batch.push('c\n')
  await new Promise((r) => setImmediate(r))
  expect(writes).toEqual(['a\nb\n', 'c\n'])
})

test('flush writes what is pending at once and leaves nothing scheduled', async () => {
  const {writes, out} = sink()
  const batch = new LineBatch(out)
  batch.push('last\n')
  batch.flush()
  expect(writes).toEqual(['last\n'])
  await new Promise((r) => setImmediate(r))
  batch.flush()
  expect(writes).toEqual(['last\n'])
})

import {describe, expect, test} from '@jest/globals'
import {relative} from 'node:path'
import {isWithin} from '../../src/common/paths.js'

describe('isWithin', () => {
  test('a path is within itself and its ancestors, not within a sibling sharing a prefix, nor a parent within its child', () => {
    expect(isWithin('/a/b', '/a/b')).toBe(true)
    expect(isWithin('/a/b', '/a/b/c')).toBe(true)
    expect(isWithin('/', '/a')).toBe(true)
    expect(isWithin('/', '/')).toBe(true)
    expect(isWithin('/a/b', '/a/bc')).toBe(false)
    expect(isWithin('/a/b/c', '/a/b')).toBe(false)
    expect(isWithin('/root/.kube', '/root/.kube/config')).toBe(true)
  })

  test('paths that are not normalised (dot segments, doubled or trailing slashes, relative) answer as path.relative does', () => {
    const byRelative = (parent: string, child: string) => {
      const rel = relative(parent, child)
      return rel === '' || (!rel.startsWith('../') && rel !== '..' && !rel.startsWith('/'))
    }
    const paths = ['/a', '/a/', '/a/b', '/a//b', '/a/./b', '/a/b/..', '/a/../a/b', '/ab', 'a', 'a/b', '.', '/', '/a/..b', '/a/.b']
    for (const parent of paths) for (const child of paths) expect({parent, child, within: isWithin(parent, child)}).toEqual({parent, child, within: byRelative(parent, child)})
  })
})

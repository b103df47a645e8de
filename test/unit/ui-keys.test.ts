import {describe, expect, test} from '@jest/globals'
import type {Key} from 'ink'
import {footerKeys, helpLines, keyAction} from '../../src/ui/dashboard/keys.js'

const none: Key = {
  upArrow: false,
  downArrow: false,
  leftArrow: false,
  rightArrow: false,
  pageDown: false,
  pageUp: false,
  home: false,
  end: false,
  return: false,
  escape: false,
  ctrl: false,
  shift: false,
  tab: false,
  backspace: false,
  delete: false,
  meta: false,
  super: false,
  hyper: false,
  capsLock: false,
  numLock: false,
} as Key

describe('dashboard keys: one table for input, help and footer', () => {
  test('each key maps to its action, and unknown keys to none', () => {
    expect(keyAction('q', none)).toBe('quit')
    expect(keyAction('k', none)).toBe('up')
    expect(keyAction('', {...none, downArrow: true})).toBe('down')
    expect(keyAction('', {...none, return: true})).toBe('details')
    expect(keyAction('', {...none, backspace: true})).toBe('back')
    expect(keyAction('X', none)).toBe('forceKill')
    expect(keyAction('S', none)).toBe('reverseSort')
    expect(keyAction('z', none)).toBeUndefined()
  })

  test('the footer of each mode, back first and quit last', () => {
    expect(footerKeys('table').map(([k, l]) => `${k} ${l}`)).toEqual(['↑↓/jk select', 'enter details', 'l logs', 'x kill', 'X force kill', 's/S sort', '? help', 'q quit'])
    expect(footerKeys('details').map(([k]) => k)).toEqual(['esc', 'l', 'x', 'q'])
    expect(footerKeys('logs').map(([k]) => k)).toEqual(['esc', 'enter', 'q'])
    expect(footerKeys('confirm')).toEqual([
      ['y', 'yes'],
      ['any other key', 'cancel'],
    ])
  })

  test('the help screen lists every command in order', () => {
    expect(helpLines().map(([k]) => k)).toEqual(['↑ ↓  j k', 'enter', 'l', 'x', 'X', 's', 'esc', 'q  ctrl-c', '?'])
  })
})

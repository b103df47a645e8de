import {describe, expect, test} from '@jest/globals'
import {formatBytes, formatCpu, parseQuantity} from '../../src/emulator/quantity.js'

describe('quantities', () => {
  test('parses decimal and binary suffixes and millicores', () => {
    expect(parseQuantity('500m')).toBeCloseTo(0.5)
    expect(parseQuantity('2')).toBe(2)
    expect(parseQuantity('8Gi')).toBe(8 * 2 ** 30)
    expect(parseQuantity('1G')).toBe(1e9)
    expect(parseQuantity('1e3')).toBe(1000)
  })
  test('rejects what is not a quantity', () => {
    expect(() => parseQuantity('eight')).toThrow(/invalid quantity "eight"/)
    expect(() => parseQuantity('8 Gi')).toThrow(RangeError)
  })
  test('formats cpu and bytes the way the kubelet reports them', () => {
    expect(formatCpu(2)).toBe('2')
    expect(formatCpu(1.5)).toBe('1500m')
    expect(formatBytes(2 ** 20)).toBe('1024Ki')
  })
})

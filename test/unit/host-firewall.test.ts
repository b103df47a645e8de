import {describe, expect, test} from '@jest/globals'
import * as fw from '../../src/common/host-firewall.js'

// The iptables bookkeeping of whoever starts kube-proxy or the reference kubelet: what it would delete.

describe('host firewall: the KUBE-* iptables lines a run added', () => {
  test('a rule with a quoted comment splits into the argv iptables -D takes', () => {
    expect(fw.splitRule('-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP')).toEqual([
      '-A',
      'KUBE-FIREWALL',
      '!',
      '-s',
      '127.0.0.0/8',
      '-d',
      '127.0.0.0/8',
      '-m',
      'comment',
      '--comment',
      'block incoming localnet connections',
      '-j',
      'DROP',
    ])
    expect(fw.splitRule('-A X -m comment --comment "say \\"hi\\"" -j ACCEPT')).toEqual(['-A', 'X', '-m', 'comment', '--comment', 'say "hi"', '-j', 'ACCEPT'])
  })

  test('only lines that were not there before count: what the host had stays', () => {
    const before = {'iptables filter': ['-N KUBE-FIREWALL', '-A INPUT -j KUBE-FIREWALL']}
    const now = {
      'iptables filter': ['-N KUBE-FIREWALL', '-A INPUT -j KUBE-FIREWALL', '-A OUTPUT -j KUBE-FIREWALL'],
      'iptables mangle': ['-N KUBE-IPTABLES-HINT'],
      'ip6tables filter': [],
    }
    expect(fw.firewallAdded(before, now)).toEqual({'iptables filter': ['-A OUTPUT -j KUBE-FIREWALL'], 'iptables mangle': ['-N KUBE-IPTABLES-HINT']})
    expect(fw.firewallAdded(now, now)).toEqual({})
  })
})

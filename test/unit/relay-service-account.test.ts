import {expect, test} from '@jest/globals'
import {serviceAccountPending} from '../../src/emulator/relay/node-relay.js'

test("a relay pod refused because its new namespace's default ServiceAccount is not made yet is tried again; other refusals are not", () => {
  const status = (code: number, message: string) => Object.assign(new Error(`HTTP-Code: ${code}`), {code, body: JSON.stringify({kind: 'Status', code, message})})
  expect(serviceAccountPending(status(403, 'pods "vnode-relay-n" is forbidden: error looking up service account vnode-system/default: serviceaccount "default" not found'))).toBe(true)
  expect(serviceAccountPending(status(403, 'pods is forbidden: User "dev" cannot create resource "pods" in API group "" in the namespace "vnode-system"'))).toBe(false)
  expect(serviceAccountPending(status(500, 'error looking up service account vnode-system/default: serviceaccount "default" not found'))).toBe(false)
})

import {describe, expect, test} from '@jest/globals'
import type {IncomingMessage} from 'node:http'
import {type AccessAttributes, cleanPath, KubeletAuth, type Reviewer, subresourcesFor, type UserInfo, verbFor} from '../../src/emulator/server/auth.js'
import {TtlCache} from '../../src/emulator/server/ttl-cache.js'

function request(opts: {method?: string; token?: string; cert?: {CN: string; O?: string | string[]}; authorized?: boolean} = {}): IncomingMessage {
  const socket = {
    getPeerCertificate: () => (opts.cert ? {subject: opts.cert} : {}),
    authorized: opts.authorized ?? false,
    authorizationError: opts.authorized ? undefined : 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  }
  return {method: opts.method ?? 'GET', headers: opts.token ? {authorization: `Bearer ${opts.token}`} : {}, socket} as unknown as IncomingMessage
}

class FakeReviewer implements Reviewer {
  tokenCalls = 0
  sarCalls: {user: UserInfo; attrs: AccessAttributes}[] = []
  allow = new Set<string>()
  async tokenReview(token: string) {
    this.tokenCalls++
    if (token === 'good') return {authenticated: true, user: {name: 'system:serviceaccount:ns:sa', groups: ['system:serviceaccounts']}}
    if (token === 'boom') throw new Error('connection refused')
    return {authenticated: false, error: 'invalid bearer token'}
  }
  async subjectAccessReview(user: UserInfo, attrs: AccessAttributes) {
    this.sarCalls.push({user, attrs})
    return this.allow.has(`${user.name}:${attrs.verb}:${attrs.subresource}`)
  }
}

function auth(reviewer: Reviewer, over: Partial<ConstructorParameters<typeof KubeletAuth>[0]> = {}, now = () => Date.now()) {
  return new KubeletAuth({nodeName: 'n1', anonymousAuth: false, authorizationMode: 'Webhook', clientCa: true, reviewer, now, ...over})
}

describe('kubelet API request attributes', () => {
  test('subresources follow the kubelet mapping, fine-grained ones first', () => {
    expect(subresourcesFor('/stats/summary')).toEqual(['stats'])
    expect(subresourcesFor('/metrics/resource')).toEqual(['metrics'])
    expect(subresourcesFor('/logs/syslog')).toEqual(['log'])
    expect(subresourcesFor('/containerLogs/ns/p/c')).toEqual(['proxy'])
    expect(subresourcesFor('/pods')).toEqual(['pods', 'proxy'])
    expect(subresourcesFor('/runningpods/')).toEqual(['pods', 'proxy'])
    expect(subresourcesFor('/healthz')).toEqual(['healthz', 'proxy'])
    expect(subresourcesFor('/statsfoo')).toEqual(['proxy'])
    // Cleaned first: no escaping the mapping with dot segments.
    expect(subresourcesFor('/stats/../containerLogs/a/b/c')).toEqual(['proxy'])
    expect(cleanPath('/runningpods/')).toBe('/runningpods')
  })

  test('verbs come from the HTTP method', () => {
    expect(verbFor('GET')).toBe('get')
    expect(verbFor('POST')).toBe('create')
    expect(verbFor('PUT')).toBe('update')
    expect(verbFor('PATCH')).toBe('patch')
    expect(verbFor('DELETE')).toBe('delete')
    expect(verbFor('OPTIONS')).toBe('')
  })
})

describe('kubelet API authentication', () => {
  test('a verified client certificate authenticates as CN with O groups plus system:authenticated', async () => {
    const r = new FakeReviewer()
    const {user} = await auth(r).authenticate(request({cert: {CN: 'kube-apiserver-kubelet-client', O: 'system:masters'}, authorized: true}))
    expect(user).toEqual({name: 'kube-apiserver-kubelet-client', groups: ['system:masters', 'system:authenticated']})
    expect(r.tokenCalls).toBe(0)
  })

  test('an unverified certificate is an error, not anonymous, even with anonymous on', async () => {
    const a = auth(new FakeReviewer(), {anonymousAuth: true})
    const out = await a.authenticate(request({cert: {CN: 'mallory'}, authorized: false}))
    expect(out.user).toBeUndefined()
    expect(out.error).toContain('not verified')
    expect(await a.check(request({cert: {CN: 'mallory'}}), '/pods')).toEqual({ok: false, status: 401, message: 'Unauthorized'})
  })

  test('bearer tokens go through TokenReview, cached; failures of the review itself are not cached', async () => {
    const r = new FakeReviewer()
    const a = auth(r)
    expect((await a.authenticate(request({token: 'good'}))).user?.groups).toEqual(['system:serviceaccounts', 'system:authenticated'])
    await a.authenticate(request({token: 'good'}))
    expect(r.tokenCalls).toBe(1)
    expect((await a.authenticate(request({token: 'bad'}))).error).toBe('invalid bearer token')
    await a.authenticate(request({token: 'boom'}))
    await a.authenticate(request({token: 'boom'}))
    expect(r.tokenCalls).toBe(4)
  })

  test('no credentials: 401, or system:anonymous when anonymous auth is on', async () => {
    expect(await auth(new FakeReviewer()).check(request(), '/healthz')).toEqual({ok: false, status: 401, message: 'Unauthorized'})
    const {user} = await auth(new FakeReviewer(), {anonymousAuth: true}).authenticate(request())
    expect(user).toEqual({name: 'system:anonymous', groups: ['system:unauthenticated']})
  })
})

describe('kubelet API authorization', () => {
  const sa: UserInfo = {name: 'system:serviceaccount:ns:sa', groups: ['system:authenticated']}

  test('denied: 403 with the kubelet message listing every subresource tried', async () => {
    const r = new FakeReviewer()
    const out = await auth(r).authorize(sa, 'GET', '/pods')
    expect(out).toEqual({ok: false, status: 403, message: 'Forbidden (user=system:serviceaccount:ns:sa, verb=get, resource=nodes, subresource(s)=[pods proxy])\n'})
    expect(r.sarCalls.map((c) => c.attrs)).toEqual([
      {verb: 'get', resource: 'nodes', subresource: 'pods', name: 'n1'},
      {verb: 'get', resource: 'nodes', subresource: 'proxy', name: 'n1'},
    ])
  })

  test('allowed through proxy when the fine-grained subresource is denied', async () => {
    const r = new FakeReviewer()
    r.allow.add(`${sa.name}:get:proxy`)
    expect((await auth(r).authorize(sa, 'GET', '/pods')).ok).toBe(true)
  })

  test('decisions are cached: allowed for 5 minutes, denied for 30 seconds', async () => {
    let now = 1_000_000
    const r = new FakeReviewer()
    const a = auth(r, {}, () => now)
    await a.authorize(sa, 'GET', '/stats/summary')
    r.allow.add(`${sa.name}:get:stats`)
    expect((await a.authorize(sa, 'GET', '/stats/summary')).ok).toBe(false)
    expect(r.sarCalls).toHaveLength(1)
    now += 30_001
    expect((await a.authorize(sa, 'GET', '/stats/summary')).ok).toBe(true)
    expect(r.sarCalls).toHaveLength(2)
    r.allow.clear()
    now += 299_000
    expect((await a.authorize(sa, 'GET', '/stats/summary')).ok).toBe(true)
    now += 2_000
    expect((await a.authorize(sa, 'GET', '/stats/summary')).ok).toBe(false)
    expect(r.sarCalls).toHaveLength(3)
  })

  test('a failing review is a 500 with the kubelet message; AlwaysAllow asks nothing', async () => {
    const failing: Reviewer = {tokenReview: async () => ({authenticated: false}), subjectAccessReview: async () => Promise.reject(new Error('forbidden to create subjectaccessreviews'))}
    const out = await auth(failing).authorize(sa, 'GET', '/metrics/resource')
    expect(out).toMatchObject({ok: false, status: 500})
    expect(out.ok === false && out.message).toContain('Authorization error (user=system:serviceaccount:ns:sa, verb=get, resource=nodes, subresource(s)=[metrics])')
    const r = new FakeReviewer()
    expect((await auth(r, {authorizationMode: 'AlwaysAllow'}).authorize(sa, 'GET', '/pods')).ok).toBe(true)
    expect(r.sarCalls).toHaveLength(0)
  })
})

describe('TtlCache', () => {
  test('entries expire and the map stays within its bound', () => {
    let now = 0
    const c = new TtlCache<number>(3, () => now)
    c.set('a', 1, 10)
    c.set('b', 2, 100)
    c.set('c', 3, 100)
    c.set('d', 4, 100)
    expect(c.size).toBe(3)
    expect(c.get('a')).toBeUndefined()
    now = 50
    expect(c.get('d')).toBe(4)
    now = 200
    expect(c.get('b')).toBeUndefined()
    for (let i = 0; i < 100; i++) c.set(`k${i}`, i, 1000)
    expect(c.size).toBe(3)
  })
})

import {createHash} from 'node:crypto'
import type {IncomingMessage} from 'node:http'
import {posix} from 'node:path'
import type {PeerCertificate, TLSSocket} from 'node:tls'
import {TtlCache} from './ttl-cache.js'

/**
 * The kubelet's delegated authentication and authorization
 * (pkg/kubelet/server/auth.go, k8s.io/apiserver delegating authenticator):
 * x509 client certificates against a CA, bearer tokens through TokenReview,
 * optional anonymous; a SubjectAccessReview on nodes/<subresource>.
 */

export type AuthorizationMode = 'AlwaysAllow' | 'Webhook'

/** The kubelet's webhook cache TTLs (authentication 2 min; authorization 5 min allowed, 30 s denied). */
export const DefaultAuthnCacheTtlMs = 2 * 60_000
export const DefaultAuthzAllowedTtlMs = 5 * 60_000
export const DefaultAuthzDeniedTtlMs = 30_000
export const DefaultAuthCacheEntries = 1024

export const AnonymousUser = 'system:anonymous'
export const UnauthenticatedGroup = 'system:unauthenticated'
export const AuthenticatedGroup = 'system:authenticated'

export interface UserInfo {
  name: string
  uid?: string
  groups: string[]
  extra?: Record<string, string[]>
}

export interface TokenReviewResult {
  authenticated: boolean
  user?: UserInfo
  error?: string
}

export interface AccessAttributes {
  verb: string
  resource: 'nodes'
  subresource: string
  name: string
}

/** The two API calls the webhook modes make; errors are thrown. */
export interface Reviewer {
  tokenReview(token: string): Promise<TokenReviewResult>
  subjectAccessReview(user: UserInfo, attrs: AccessAttributes): Promise<boolean>
}

/** The kubelet's mapping from HTTP method to verb (other methods get an empty verb). */
export function verbFor(method: string | undefined): string {
  return ({POST: 'create', GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete'} as Record<string, string>)[method ?? ''] ?? ''
}

function isSubpath(path: string, sub: string): boolean {
  return path === sub || path.startsWith(`${sub}/`)
}

/** Go's path.Clean for an absolute URL path. */
export function cleanPath(path: string): string {
  const p = posix.normalize(`/${path}`)
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p
}

/**
 * The subresources checked, in order, for a request path: the kubelet's
 * mapping with the fine-grained gate of 1.33+ (on by default), where pods,
 * healthz and configz are tried first and proxy still grants everything else.
 */
export function subresourcesFor(path: string): string[] {
  const p = cleanPath(path)
  const out: string[] = []
  if (isSubpath(p, '/pods') || isSubpath(p, '/runningpods')) out.push('pods')
  else if (isSubpath(p, '/healthz')) out.push('healthz')
  else if (isSubpath(p, '/configz')) out.push('configz')
  if (isSubpath(p, '/stats')) out.push('stats')
  else if (isSubpath(p, '/metrics')) out.push('metrics')
  else if (isSubpath(p, '/logs')) out.push('log')
  else if (isSubpath(p, '/checkpoint')) out.push('checkpoint')
  else if (isSubpath(p, '/statusz')) out.push('statusz')
  else out.push('proxy')
  return out
}

export interface AuthOptions {
  nodeName: string
  anonymousAuth: boolean
  authorizationMode: AuthorizationMode
  /** Whether a client CA is configured; without one, client certificates authenticate nobody. */
  clientCa: boolean
  reviewer: Reviewer
  authnCacheTtlMs?: number
  authzAllowedTtlMs?: number
  authzDeniedTtlMs?: number
  now?: () => number
}

export type AuthOutcome = {ok: true; user: UserInfo} | {ok: false; status: 401 | 403 | 500; message: string}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v
}

function asList(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v]
}

function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization
  if (!header) return undefined
  const parts = header.trim().split(/\s+/)
  if (parts.length < 2 || parts[0].toLowerCase() !== 'bearer' || parts[1] === '') return undefined
  return parts[1]
}

function withAuthenticatedGroup(user: UserInfo): UserInfo {
  if (user.name === AnonymousUser || user.groups.includes(AuthenticatedGroup) || user.groups.includes(UnauthenticatedGroup)) return user
  return {...user, groups: [...user.groups, AuthenticatedGroup]}
}

export class KubeletAuth {
  private readonly tokens: TtlCache<TokenReviewResult>
  private readonly decisions: TtlCache<boolean>

  constructor(private readonly opts: AuthOptions) {
    this.tokens = new TtlCache(DefaultAuthCacheEntries, opts.now)
    this.decisions = new TtlCache(DefaultAuthCacheEntries, opts.now)
  }

  /** x509 first, then a bearer token; errors in either refuse the request even with anonymous on. */
  async authenticate(req: IncomingMessage): Promise<{user?: UserInfo; error?: string}> {
    const errors: string[] = []
    const cert = this.certificateUser(req.socket as TLSSocket)
    if (cert.user) return {user: withAuthenticatedGroup(cert.user)}
    if (cert.error) errors.push(cert.error)
    const token = bearerToken(req)
    if (token !== undefined) {
      const review = await this.reviewToken(token)
      if (review.authenticated && review.user) return {user: withAuthenticatedGroup(review.user)}
      errors.push(review.error || 'token not authenticated')
    }
    if (errors.length > 0) return {error: errors.join('; ')}
    if (this.opts.anonymousAuth) return {user: {name: AnonymousUser, groups: [UnauthenticatedGroup]}}
    return {}
  }

  private certificateUser(socket: TLSSocket): {user?: UserInfo; error?: string} {
    const peer = typeof socket.getPeerCertificate === 'function' ? (socket.getPeerCertificate() as PeerCertificate | null) : null
    if (!peer || Object.keys(peer).length === 0) return {}
    if (!this.opts.clientCa) return {error: 'client certificate presented but no client CA is configured'}
    if (!socket.authorized) return {error: `client certificate not verified: ${String(socket.authorizationError ?? 'unknown error')}`}
    const cn = first(peer.subject?.CN)
    if (!cn) return {error: 'client certificate has no common name'}
    return {user: {name: cn, groups: asList(peer.subject?.O)}}
  }

  private async reviewToken(token: string): Promise<TokenReviewResult> {
    const key = createHash('sha256').update(token).digest('hex')
    const cached = this.tokens.get(key)
    if (cached) return cached
    let result: TokenReviewResult
    try {
      result = await this.opts.reviewer.tokenReview(token)
    } catch (error) {
      // Not cached: the next request asks again.
      return {authenticated: false, error: `token review failed: ${(error as Error).message}`}
    }
    this.tokens.set(key, result, this.opts.authnCacheTtlMs ?? DefaultAuthnCacheTtlMs)
    return result
  }

  /** Allowed when any of the path's subresources is allowed (in order, as the kubelet tries them). */
  async authorize(user: UserInfo, method: string | undefined, path: string): Promise<AuthOutcome> {
    const verb = verbFor(method)
    const subresources = subresourcesFor(path)
    if (this.opts.authorizationMode === 'AlwaysAllow') return {ok: true, user}
    const tried: string[] = []
    for (const subresource of subresources) {
      tried.push(subresource)
      const attrs: AccessAttributes = {verb, resource: 'nodes', subresource, name: this.opts.nodeName}
      let allowed: boolean
      try {
        allowed = await this.decide(user, attrs)
      } catch (error) {
        return {
          ok: false,
          status: 500,
          message: `Authorization error (user=${user.name}, verb=${verb}, resource=nodes, subresource(s)=[${tried.join(' ')}]): ${(error as Error).message}`,
        }
      }
      if (allowed) return {ok: true, user}
    }
    return {ok: false, status: 403, message: `Forbidden (user=${user.name}, verb=${verb}, resource=nodes, subresource(s)=[${subresources.join(' ')}])\n`}
  }

  private async decide(user: UserInfo, attrs: AccessAttributes): Promise<boolean> {
    const key = JSON.stringify([user.name, user.uid ?? '', [...user.groups].sort(), user.extra ?? {}, attrs.verb, attrs.subresource, attrs.name])
    const cached = this.decisions.get(key)
    if (cached !== undefined) return cached
    const allowed = await this.opts.reviewer.subjectAccessReview(user, attrs)
    const ttl = allowed ? (this.opts.authzAllowedTtlMs ?? DefaultAuthzAllowedTtlMs) : (this.opts.authzDeniedTtlMs ?? DefaultAuthzDeniedTtlMs)
    this.decisions.set(key, allowed, ttl)
    return allowed
  }

  /** Authentication then authorization, with the kubelet's status codes and messages. */
  async check(req: IncomingMessage, path: string): Promise<AuthOutcome> {
    const {user} = await this.authenticate(req)
    if (!user) return {ok: false, status: 401, message: 'Unauthorized'}
    return this.authorize(user, req.method, path)
  }

  clear(): void {
    this.tokens.clear()
    this.decisions.clear()
  }
}

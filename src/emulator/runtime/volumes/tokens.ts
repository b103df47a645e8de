import type {AuthenticationV1TokenRequest, CoreV1Api, V1Pod} from '@kubernetes/client-node'

/** Token lifetime when a projected serviceAccountToken does not say (the API default). */
export const DefaultTokenExpirationSeconds = 3600
/** The kubelet refreshes a token older than this whatever its lifetime. */
export const MaxTokenAgeMs = 24 * 3600_000
/** A token is refreshed once less than this fraction of its lifetime is left (the kubelet: 20%, so before 80% have passed). */
export const TokenRefreshRemainingFraction = 0.2
/** Up to this much random earlier, so a burst's tokens are not all refreshed at once (the kubelet's maxJitter). */
export const DefaultTokenRefreshJitterMs = 10_000

export interface TokenProjection {
  audience?: string
  expirationSeconds?: number
}

/** The projected service account tokens of the node's pods. */
export interface TokenSource {
  /** The pod's token for this projection: the cached one while fresh, a new TokenRequest once it is due. */
  token(pod: V1Pod, projection: TokenProjection): Promise<string>
  /** The pod is gone: its tokens are dropped. */
  forget(podUid: string): void
}

interface CachedToken {
  podUid: string
  token: string
  /** When the token expires and when it was issued, from the answer (ms since the epoch). */
  expiresAt: number
  issuedAt: number
}

/**
 * The kubelet's token manager: one TokenRequest per pod and projection,
 * kept and served from memory until it is due (older than 80% of its
 * lifetime, minus a jitter, or older than 24 h); a failed refresh keeps
 * serving the old token while it is valid. The clock is injected.
 */
export class ServiceAccountTokens implements TokenSource {
  private readonly cache = new Map<string, CachedToken>()

  constructor(
    private readonly core: CoreV1Api,
    private readonly opts: {now?: () => number; jitterMs?: number; random?: () => number} = {},
  ) {}

  private now(): number {
    return this.opts.now?.() ?? Date.now()
  }

  async token(pod: V1Pod, p: TokenProjection): Promise<string> {
    const sa = pod.spec?.serviceAccountName || 'default'
    const namespace = pod.metadata!.namespace!
    const uid = pod.metadata!.uid!
    const seconds = p.expirationSeconds ?? DefaultTokenExpirationSeconds
    const key = `${namespace}/${sa}/${uid}/${p.audience ?? ''}/${seconds}`
    const cached = this.cache.get(key)
    if (cached && !this.dueForRefresh(cached)) return cached.token
    let answer: AuthenticationV1TokenRequest
    try {
      answer = await this.core.createNamespacedServiceAccountToken({
        name: sa,
        namespace,
        body: {
          spec: {
            audiences: p.audience ? [p.audience] : [],
            expirationSeconds: seconds,
            boundObjectRef: {kind: 'Pod', apiVersion: 'v1', name: pod.metadata!.name!, uid},
          },
        },
      })
    } catch (error) {
      if (cached && this.now() < cached.expiresAt) return cached.token
      throw error
    }
    const lifetimeMs = Number(answer.spec?.expirationSeconds ?? seconds) * 1000
    const expiresAt = answer.status?.expirationTimestamp ? new Date(answer.status.expirationTimestamp).getTime() : this.now() + lifetimeMs
    const token = {podUid: uid, token: answer.status?.token ?? '', expiresAt, issuedAt: expiresAt - lifetimeMs}
    this.cache.set(key, token)
    return token.token
  }

  /** The kubelet's requiresRefresh. */
  dueForRefresh(t: CachedToken): boolean {
    const now = this.now()
    const jitter = (this.opts.random ?? Math.random)() * (this.opts.jitterMs ?? DefaultTokenRefreshJitterMs)
    if (now > t.issuedAt + MaxTokenAgeMs - jitter) return true
    return now > t.expiresAt - (t.expiresAt - t.issuedAt) * TokenRefreshRemainingFraction - jitter
  }

  forget(podUid: string): void {
    for (const [k, t] of this.cache) if (t.podUid === podUid) this.cache.delete(k)
  }

  /** Tokens held (tests: none is left once the pods are gone). */
  get size(): number {
    return this.cache.size
  }
}

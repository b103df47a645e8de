import {X509Certificate} from 'node:crypto'
import {UserError} from '../../errors.js'
import {DefaultServingRenewBeforeMs, ensureServingCert} from './serving-cert.js'
import {type CsrApi, DefaultAutoCsrWaitMs, DefaultCsrWaitMs, keptClusterCert, KubeletServingSigner, requestServingCert, type ServingCertMode} from './serving-csr.js'

/**
 * Which serving certificate the kubelet API serves, and when it changes:
 * the cluster's (a kubelet-serving CSR, serving-csr.ts) or the node's own
 * self-signed one (serving-cert.ts), chosen by `up --serving-cert`, asked
 * again for new names and before expiry. The server is told of each change
 * (onServe) and serves it to new connections.
 */

export interface ServingCertSource {
  /** auto: a cluster-signed one when the cluster issues it within waitMs, else self-signed; csr: cluster-signed or an error. */
  mode: ServingCertMode
  api?: CsrApi
  /** The cluster's API server URL: a kept certificate is used again only for the cluster that issued it. */
  cluster?: string
  waitMs?: number
  /** One line per certificate served, and why. */
  log?: (line: string) => void
  /** Which certificate is served now, each time that is settled: `cluster`, or `self-signed: <why>`. */
  onServed?: (what: string) => void
}

/** The certificate served, and who signed it. */
export interface ServedCert {
  cert: Buffer
  key: Buffer
  signedBy: 'self' | 'cluster'
}

export interface ServingCertsOptions {
  stateDir: string
  nodeName: string
  /** Default self-signed. */
  source?: ServingCertSource
  /** A certificate to serve from now on (a cluster's that came later, a renewal). */
  onServe: (cert: ServedCert) => void
}

export class ServingCerts {
  private renewal?: NodeJS.Timeout
  /** The cluster-signed certificate asked for in the background at start (auto), until it is served or given up. */
  private pending?: Promise<void>
  private readonly stopping = new AbortController()
  /** The names the current certificate is for: a late answer for other names is not served. */
  private sans: string[] = []
  /** Why the last choice was the self-signed certificate. */
  private selfSignedWhy = 'asked for with --serving-cert self-signed'
  current?: ServedCert

  constructor(private readonly opts: ServingCertsOptions) {}

  /**
   * The certificate to listen with. auto without a kept cluster-signed one:
   * the self-signed one at once, and the cluster's served once issued (as the
   * kubelet's certificate manager does), so a slow or silent signer never
   * delays the node. csr waits for the cluster's; self-signed never asks.
   */
  async first(sans: string[]): Promise<ServedCert> {
    this.sans = sans
    const source = this.opts.source
    if (source?.mode !== 'auto' || !source.api) return this.report((this.current = await this.forNames(sans)))
    const kept = await this.kept(sans)
    if (kept) return this.report((this.current = kept))
    // Set before the cluster is asked, so the cluster's, when it comes, is never replaced by it.
    const own = (this.current = await this.selfSigned(sans))
    this.selfSignedWhy = "the cluster's is asked for (a kubelet-serving CSR)"
    this.report(own)
    this.pending = this.forNames(sans, false).then(
      (c) => {
        if (this.sans !== sans || this.stopping.signal.aborted) return
        if (c.signedBy === 'cluster') this.serve(c)
        else this.report(c)
      },
      () => undefined,
    )
    return own
  }

  /** Covers more names (a relay's IP): the certificate for them, served from now on. */
  async cover(sans: string[]): Promise<void> {
    this.sans = sans
    this.serve(await this.forNames(sans))
  }

  /** Resolves once what first asked of the cluster is settled (at once when nothing is pending). */
  async settled(): Promise<void> {
    await this.pending
  }

  async stop(): Promise<void> {
    clearTimeout(this.renewal)
    this.stopping.abort()
    await this.pending
  }

  private serve(cert: ServedCert): void {
    this.current = cert
    this.opts.onServe(cert)
    this.report(cert)
  }

  private report(cert: ServedCert): ServedCert {
    this.opts.source?.onServed?.(cert.signedBy === 'cluster' ? 'cluster' : `self-signed: ${this.selfSignedWhy}`)
    return cert
  }

  /**
   * The certificate for these names: the cluster-signed one kept or newly
   * issued (auto, csr), else the self-signed one, with one line saying which
   * and why. A cluster-signed one is renewed before it expires.
   */
  private async forNames(sans: string[], useKept = true): Promise<ServedCert> {
    const source = this.opts.source ?? {mode: 'self-signed'}
    const log = source.log ?? (() => undefined)
    if (source.mode !== 'self-signed' && !source.api) this.selfSignedWhy = 'no cluster to ask'
    if (source.mode !== 'self-signed' && source.api) {
      const kept = useKept ? await this.kept(sans) : undefined
      if (kept) return kept
      const waitMs = source.waitMs ?? (source.mode === 'csr' ? DefaultCsrWaitMs : DefaultAutoCsrWaitMs)
      const signal = this.stopping.signal
      const r = await requestServingCert({api: source.api, cluster: source.cluster ?? '', stateDir: this.opts.stateDir, nodeName: this.opts.nodeName, sans, waitMs, log, signal}).catch(
        (e: Error): {ok: false; why: string} => ({
          ok: false,
          why: `cannot request it: ${e.message}`,
        }),
      )
      if (signal.aborted) return this.selfSigned(sans)
      if (r.ok) {
        log(`serving certificate: issued by the cluster (CSR ${r.csrName}, signer ${KubeletServingSigner}) for ${sans.join(', ')}`)
        this.renewAt(Date.parse(new X509Certificate(r.cert).validTo), sans)
        return {cert: r.cert, key: r.key, signedBy: 'cluster'}
      }
      if (source.mode === 'csr') throw new UserError(`serving certificate: ${r.why} (--serving-cert auto would serve a self-signed one instead)`)
      this.selfSignedWhy = r.why
      log(`serving certificate: self-signed: ${r.why}; an API server that verifies kubelet certificates refuses it, and only kubectl logs --insecure-skip-tls-verify-backend gets through`)
    }
    return this.selfSigned(sans)
  }

  private async selfSigned(sans: string[]): Promise<ServedCert> {
    const own = await ensureServingCert(this.opts.stateDir, this.opts.nodeName, sans)
    return {cert: own.cert, key: own.key, signedBy: 'self'}
  }

  /** The cluster-signed certificate kept from an earlier run, when it covers these names and is not due for renewal. */
  private async kept(sans: string[]): Promise<ServedCert | undefined> {
    const kept = await keptClusterCert(this.opts.stateDir, this.opts.source?.cluster ?? '', sans, DefaultServingRenewBeforeMs)
    if (!kept) return undefined
    this.renewAt(kept.validTo, sans)
    return {cert: kept.cert, key: kept.key, signedBy: 'cluster'}
  }

  /** Asks again for the names served once the certificate is within its renewal window. */
  private renewAt(validTo: number, sans: string[]): void {
    clearTimeout(this.renewal)
    const delay = Math.min(Math.max(validTo - DefaultServingRenewBeforeMs - Date.now(), 60_000), 2 ** 31 - 1)
    this.renewal = setTimeout(() => {
      if (this.stopping.signal.aborted || this.sans.length !== sans.length) return
      void this.forNames(sans)
        .then((c) => !this.stopping.signal.aborted && this.serve(c))
        .catch((e: Error) => this.opts.source?.log?.(`serving certificate: cannot renew it: ${e.message}`))
    }, delay)
    this.renewal.unref()
  }
}

import {createServer} from 'node:net'

/** Asks the kernel for a free TCP port on host. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.unref()
    srv.once('error', reject)
    srv.listen(0, host, () => {
      const addr = srv.address()
      const port = typeof addr === 'object' && addr ? addr.port : 0
      srv.close(() => resolve(port))
    })
  })
}

/** The preferred port when it is free, otherwise a free one. */
export function portOr(preferred: number, host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer()
    srv.unref()
    srv.once('error', () => resolve(freePort(host)))
    srv.listen(preferred, host, () => srv.close(() => resolve(preferred)))
  })
}

// Per-object vs per-namespace list+watch of ConfigMaps and Secrets: requests, bytes listed, events
// streamed for one change of every object. `node bench/watch-scope.mjs KUBECONFIG` (a scratch cluster:
// it creates and deletes the namespace "measure").
import * as k8s from '@kubernetes/client-node'
const kc = new k8s.KubeConfig()
kc.loadFromFile(process.argv[2])
const core = kc.makeApiClient(k8s.CoreV1Api)
const ns = 'measure'
await core.createNamespace({body: {metadata: {name: ns}}}).catch(() => {})
const N = 20
for (let i = 0; i < N; i++) {
  await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: `cm${i}`}, data: {k: 'x'.repeat(1024)}}}).catch(() => {})
  await core.createNamespacedSecret({namespace: ns, body: {metadata: {name: `s${i}`}, stringData: {k: 'y'.repeat(2048)}}}).catch(() => {})
}
const referenced = [
  ['configmaps', 'cm0'],
  ['configmaps', 'cm1'],
  ['secrets', 's0'],
]
async function run(mode) {
  let requests = 0,
    bytes = 0,
    events = 0,
    eventBytes = 0
  const ctrls = []
  const w = new k8s.Watch(kc)
  const targets =
    mode === 'object'
      ? referenced.map(([r, n]) => [r, `metadata.name=${n}`])
      : [
          ['configmaps', undefined],
          ['secrets', undefined],
        ]
  for (const [r, fieldSelector] of targets) {
    const list = r === 'configmaps' ? await core.listNamespacedConfigMap({namespace: ns, fieldSelector}) : await core.listNamespacedSecret({namespace: ns, fieldSelector})
    requests += 2
    bytes += JSON.stringify(list).length
    ctrls.push(
      await w.watch(
        `/api/v1/namespaces/${ns}/${r}`,
        {fieldSelector, resourceVersion: list.metadata.resourceVersion},
        (t, o) => {
          events++
          eventBytes += JSON.stringify(o).length
        },
        () => {},
      ),
    )
  }
  for (let i = 0; i < N; i++) {
    await core.replaceNamespacedConfigMap({name: `cm${i}`, namespace: ns, body: {metadata: {name: `cm${i}`}, data: {k: `${mode}${i}`.padEnd(1024, 'x')}}})
    await core.replaceNamespacedSecret({name: `s${i}`, namespace: ns, body: {metadata: {name: `s${i}`}, stringData: {k: `${mode}${i}`.padEnd(2048, 'y')}}})
  }
  await new Promise((r) => setTimeout(r, 2000))
  for (const c of ctrls) c.abort()
  console.log(JSON.stringify({mode, openWatches: ctrls.length, requests, listedBytes: bytes, eventsForOneChangeOfEach: events, eventBytes}))
}
await run('object')
await run('namespace')
await core.deleteNamespace({name: ns})

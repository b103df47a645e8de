import {afterAll, beforeAll, expect, test} from '@jest/globals'
import {KubectlFixture, markedContainer} from './kubectl-fixture.js'
import {describeE2e, kubectl, stopAllVnodes, testEnv, uniqueName} from './helpers.js'

/** Writes what the process sees (env, cwd) to the file named by its second argument, then keeps running. */
const reportScript = `require('fs').writeFileSync(process.argv[2], JSON.stringify({env: process.env, cwd: process.cwd()})); setInterval(() => {}, 1000)`

describeE2e('kubectl: container env as the process sees it', () => {
  const f = new KubectlFixture('kenv')

  beforeAll(async () => {
    await f.setUp()
  })
  afterAll(async () => {
    await f.tearDown()
    await stopAllVnodes()
  })

  test('value, configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef, envFrom with prefix and $(VAR) expansion; workingDir; nothing of vnode leaks', async () => {
    await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: 'app-config'}, data: {LEVEL: 'debug', color: 'blue'}}})
    await f.c.core.createNamespacedSecret({namespace: f.ns, body: {metadata: {name: 'app-secret'}, stringData: {PASSWORD: 's3cret', TOKEN: 't0k'}}})
    const marker = uniqueName('env')
    const field = (fieldPath: string) => ({valueFrom: {fieldRef: {fieldPath}}})
    await f.create({
      metadata: {name: 'env', labels: {app: 'shop'}, annotations: {team: 'web'}},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          markedContainer('app', reportScript, marker, {
            args: ['$(OUT_DIR)/env.json'],
            workingDir: f.dir,
            resources: {limits: {cpu: '250m', memory: '128Mi'}, requests: {cpu: '100m', memory: '64Mi'}},
            envFrom: [{prefix: 'CM_', configMapRef: {name: 'app-config'}}, {secretRef: {name: 'app-secret'}}],
            env: [
              {name: 'OUT_DIR', value: f.dir},
              {name: 'PLAIN', value: 'plain-value'},
              {name: 'FROM_CM', valueFrom: {configMapKeyRef: {name: 'app-config', key: 'LEVEL'}}},
              {name: 'FROM_SECRET', valueFrom: {secretKeyRef: {name: 'app-secret', key: 'PASSWORD'}}},
              {name: 'POD_NAME', ...field('metadata.name')},
              {name: 'POD_NAMESPACE', ...field('metadata.namespace')},
              {name: 'POD_UID', ...field('metadata.uid')},
              {name: 'APP_LABEL', ...field("metadata.labels['app']")},
              {name: 'TEAM', ...field("metadata.annotations['team']")},
              {name: 'NODE_NAME', ...field('spec.nodeName')},
              {name: 'SA', ...field('spec.serviceAccountName')},
              {name: 'POD_IP', ...field('status.podIP')},
              {name: 'HOST_IP', ...field('status.hostIP')},
              {name: 'CPU_LIMIT_M', valueFrom: {resourceFieldRef: {resource: 'limits.cpu', divisor: '1m'}}},
              {name: 'MEM_REQUEST_MI', valueFrom: {resourceFieldRef: {resource: 'requests.memory', divisor: '1Mi'}}},
              {name: 'GREETING', value: 'hello $(POD_NAME) at $(FROM_CM) $$(ESCAPED) $(UNDEFINED_VAR)'},
              // env overrides envFrom of the same name.
              {name: 'TOKEN', value: 'from-env'},
            ],
          }),
          // No workingDir: the container's volume root is its cwd.
          markedContainer('side', reportScript, marker, {args: [f.out('side.json')]}),
        ],
      },
    })
    const row = await f.waitRow('env', (r) => r.status === 'Running' && r.ready === '2/2', 'Running 2/2')
    expect(row.restarts).toBe(0)

    const {env, cwd} = JSON.parse(await f.file('env.json')) as {env: Record<string, string>; cwd: string}
    const pod = await f.json('env')
    const nodeIP = pod.status!.hostIP!
    expect(env).toMatchObject({
      PLAIN: 'plain-value',
      FROM_CM: 'debug',
      FROM_SECRET: 's3cret',
      POD_NAME: 'env',
      POD_NAMESPACE: f.ns,
      POD_UID: pod.metadata!.uid!,
      APP_LABEL: 'shop',
      TEAM: 'web',
      NODE_NAME: f.nodeName,
      SA: 'default',
      POD_IP: nodeIP,
      HOST_IP: nodeIP,
      CPU_LIMIT_M: '250',
      MEM_REQUEST_MI: '64',
      GREETING: 'hello env at debug $(ESCAPED) $(UNDEFINED_VAR)',
      CM_LEVEL: 'debug',
      CM_color: 'blue',
      PASSWORD: 's3cret',
      TOKEN: 'from-env',
      HOSTNAME: 'env',
    })
    // In-cluster config names the API server as this host reaches it: the ClusterIP is virtual, and nothing here translates it.
    const server = new URL(f.c.kc.getCurrentCluster()!.server)
    const kubernetesIP = (await kubectl(['get', 'service', 'kubernetes', '-n', 'default', '-o', 'jsonpath={.spec.clusterIP}'])).stdout
    expect(env.KUBERNETES_SERVICE_HOST).toBe(server.hostname)
    expect(env.KUBERNETES_SERVICE_HOST).not.toBe(kubernetesIP)
    expect(env.KUBERNETES_SERVICE_PORT).toBe(server.port)
    expect(env.KUBERNETES_PORT).toBe(`tcp://${server.hostname}:${server.port}`)
    expect(cwd).toBe(f.dir)
    // vnode runs with KUBECONFIG and the test runner's environment: none of it reaches a container.
    expect(env.KUBECONFIG).toBeUndefined()
    const specNames = pod.spec!.containers[0].env!.map((e) => e.name)
    const allowed = new Set([...specNames, 'CM_LEVEL', 'CM_color', 'PASSWORD', 'PATH', 'HOME', 'HOSTNAME', 'VNODE_VOLUME_ROOT'])
    expect(Object.keys(env).filter((k) => !allowed.has(k) && !/^KUBERNETES_(SERVICE|PORT)/.test(k))).toEqual([])
    // The PATH `up` was started with, so the user's toolchain is found (nothing else of vnode's environment).
    expect(env.PATH).toBe(testEnv().PATH)

    const side = JSON.parse(await f.file('side.json')) as {env: Record<string, string>; cwd: string}
    expect(side.env.VNODE_VOLUME_ROOT).toBeTruthy()
    expect(side.cwd).toBe(side.env.VNODE_VOLUME_ROOT)
    expect(side.env.PLAIN).toBeUndefined()

    await kubectl(['delete', 'pod', 'env', '-n', f.ns, '--wait=false'])
    await f.gone('env')
    await f.noProcess(marker)
  })

  test('service links: the Services of the namespace as env vars (from the node service watch); enableServiceLinks false keeps only the kubernetes service', async () => {
    const svc = await f.c.core.createNamespacedService({namespace: f.ns, body: {metadata: {name: 'shop-db'}, spec: {ports: [{name: 'pg', port: 5432}]}}})
    const ip = svc.spec!.clusterIP!
    const marker = uniqueName('links')
    const linked = (name: string, enableServiceLinks: boolean) =>
      f.create({
        metadata: {name},
        spec: {terminationGracePeriodSeconds: 2, enableServiceLinks, containers: [markedContainer('app', reportScript, marker, {args: [f.out(`${name}.json`)]})]},
      })
    await linked('links', true)
    await linked('nolinks', false)
    const withLinks = (JSON.parse(await f.file('links.json')) as {env: Record<string, string>}).env
    expect(withLinks).toMatchObject({
      SHOP_DB_SERVICE_HOST: ip,
      SHOP_DB_SERVICE_PORT: '5432',
      SHOP_DB_SERVICE_PORT_PG: '5432',
      SHOP_DB_PORT: `tcp://${ip}:5432`,
      SHOP_DB_PORT_5432_TCP_ADDR: ip,
    })
    expect(withLinks.KUBERNETES_SERVICE_HOST).toBeTruthy()
    const without = (JSON.parse(await f.file('nolinks.json')) as {env: Record<string, string>}).env
    expect(Object.keys(without).filter((k) => k.startsWith('SHOP_DB_'))).toEqual([])
    expect(without.KUBERNETES_SERVICE_HOST).toBe(withLinks.KUBERNETES_SERVICE_HOST)
    await kubectl(['delete', 'pod', 'links', 'nolinks', '-n', f.ns, '--wait=false'])
    await f.gone('links')
    await f.gone('nolinks')
    await f.noProcess(marker)
  })

  test('a missing mandatory ConfigMap: CreateContainerConfigError with the kubelet message and a Warning event; Running once it is created', async () => {
    const marker = uniqueName('later')
    await f.create({
      metadata: {name: 'waits'},
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [
          markedContainer('app', reportScript, marker, {
            args: [f.out('waits.json')],
            env: [{name: 'LATER', valueFrom: {configMapKeyRef: {name: 'later', key: 'k'}}}],
          }),
        ],
      },
    })
    const row = await f.waitRow('waits', (r) => r.status === 'CreateContainerConfigError', 'CreateContainerConfigError')
    expect(row).toMatchObject({ready: '0/1', restarts: 0})
    expect(await f.jsonpath('waits', '{.status.phase}|{.status.containerStatuses[0].state.waiting.reason}|{.status.containerStatuses[0].state.waiting.message}')).toBe(
      'Pending|CreateContainerConfigError|configmap "later" not found',
    )
    const described = await f.waitDescribe('waits', /Warning\s+Failed\s+.*Error: configmap "later" not found/)
    // The kubelet's events, not virtual-kubelet's MandatoryConfigMapNotFound.
    expect(described).toMatch(/Normal\s+Pulled\s+/)
    expect(described).not.toMatch(/MandatoryConfigMapNotFound/)
    expect(await f.noProcess(marker)).toBeUndefined()

    await f.c.core.createNamespacedConfigMap({namespace: f.ns, body: {metadata: {name: 'later'}, data: {k: 'arrived'}}})
    const running = await f.waitRow('waits', (r) => r.status === 'Running', 'Running after the ConfigMap appeared', 30_000)
    expect(running).toMatchObject({ready: '1/1', restarts: 0})
    // Ready was False with a reason and message; True carries neither.
    expect(await f.jsonpath('waits', '{range .status.conditions[*]}{.type}={.status}/{.reason}/{.message};{end}')).toContain('Ready=True//;')
    const {env} = JSON.parse(await f.file('waits.json')) as {env: Record<string, string>}
    expect(env.LATER).toBe('arrived')

    await kubectl(['delete', 'pod', 'waits', '-n', f.ns, '--wait=false'])
    await f.gone('waits')
    await f.noProcess(marker)
  })
})

import {describe, expect, test} from '@jest/globals'
import type {V1Node, V1Pod, V1PodTemplateSpec} from '@kubernetes/client-node'
import {AllowedNamespacesAnnotation, DevPodLabel, DevReplacedAnnotation, DevWorkloadAnnotation, NodeMarkerLabel, RestartAnnotation} from '../../src/common/labels.js'
import {buildDevPod, chooseDevContainer, devPodName, WorkdirVolume, type DevPodInput} from '../../src/cli/dev/dev-pod.js'
import {checkNamespaceAllowed, chooseNode} from '../../src/cli/dev/node-choice.js'
import {instanceToRead, podChanges} from '../../src/cli/dev/pod-follow.js'
import {parsePortMapping} from '../../src/cli/dev/port-forward.js'
import {parseSavedScale} from '../../src/cli/dev/replace.js'
import {parseWorkloadRef, type Workload} from '../../src/cli/dev/workload.js'
import {argvText, devLine} from '../../src/ui/dev-output.js'

const Taint = {key: 'virtual-kubelet.io/provider', value: 'vnode', effect: 'NoSchedule'}

function template(): V1PodTemplateSpec {
  return {
    metadata: {labels: {app: 'web', 'pod-template-hash': 'abc', 'batch.kubernetes.io/controller-uid': 'u'}, annotations: {team: 'shop'}},
    spec: {
      serviceAccountName: 'web',
      nodeSelector: {disk: 'ssd'},
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}, podAntiAffinity: {}},
      tolerations: [{key: 'dedicated', operator: 'Equal', value: 'web', effect: 'NoSchedule'}],
      volumes: [{name: 'secret', secret: {secretName: 'web-secret'}}],
      initContainers: [{name: 'proxy', image: 'envoy', restartPolicy: 'Always'}],
      containers: [
        {
          name: 'app',
          image: 'registry.example/web:1.2',
          imagePullPolicy: 'Never',
          command: ['/web'],
          args: ['--serve'],
          env: [{name: 'MODE', value: 'prod'}],
          envFrom: [{configMapRef: {name: 'web-config'}}],
          volumeMounts: [{name: 'secret', mountPath: '/etc/secret'}],
          ports: [{containerPort: 8080}],
          resources: {limits: {memory: '256Mi'}},
          securityContext: {runAsNonRoot: true},
          readinessProbe: {httpGet: {path: '/ready', port: 8080}},
          livenessProbe: {httpGet: {path: '/live', port: 8080}},
          startupProbe: {httpGet: {path: '/live', port: 8080}},
        },
        {name: 'metrics', image: 'exporter', readinessProbe: {tcpSocket: {port: 9100}}},
      ],
    },
  }
}

function input(over: Partial<DevPodInput> = {}, workload: Partial<Workload> = {}): DevPodInput {
  return {
    workload: {ref: {kind: 'deployment', name: 'web'}, template: template(), replicas: 2, annotations: {}, fromPod: false, ...workload},
    namespace: 'shop',
    container: 'app',
    command: ['python3', 'server.py'],
    cwd: '/home/me/web',
    node: {name: 'laptop', taints: [Taint]},
    probes: true,
    suffix: 'x1y2z',
    ...over,
  }
}

describe('WORKLOAD', () => {
  test("kubectl's spellings of the kinds, and a bare name is a pod", () => {
    expect(parseWorkloadRef('deploy/web')).toEqual({kind: 'deployment', name: 'web'})
    expect(parseWorkloadRef('deployments.apps/web')).toEqual({kind: 'deployment', name: 'web'})
    expect(parseWorkloadRef('sts/db')).toEqual({kind: 'statefulset', name: 'db'})
    expect(parseWorkloadRef('StatefulSet/db')).toEqual({kind: 'statefulset', name: 'db'})
    expect(parseWorkloadRef('job/migrate')).toEqual({kind: 'job', name: 'migrate'})
    expect(parseWorkloadRef('pod/web-0')).toEqual({kind: 'pod', name: 'web-0'})
    expect(parseWorkloadRef('web-0')).toEqual({kind: 'pod', name: 'web-0'})
  })

  test('an unknown kind, a bad name or too many slashes is refused, saying what is expected', () => {
    expect(() => parseWorkloadRef('cronjob/x')).toThrow('invalid workload "cronjob/x": unknown kind "cronjob"; expected deploy/NAME, statefulset/NAME, job/NAME, pod/NAME or a pod name')
    expect(() => parseWorkloadRef('deploy/')).toThrow('invalid workload "deploy/": "" is not a valid deployment name')
    expect(() => parseWorkloadRef('deploy/Web_1')).toThrow('"Web_1" is not a valid deployment name')
    expect(() => parseWorkloadRef('a/b/c')).toThrow('invalid workload "a/b/c": expected')
  })
})

describe('the dev pod', () => {
  test("the template's pod, its chosen container running COMMAND in the current directory, pinned to the node", () => {
    const pod = buildDevPod(input())
    expect(pod.metadata).toEqual({
      name: 'web-dev-x1y2z',
      namespace: 'shop',
      labels: {app: 'web', [DevPodLabel]: 'true'},
      annotations: {team: 'shop', [DevWorkloadAnnotation]: 'deployment/web', [RestartAnnotation]: 'app:0'},
    })
    const spec = pod.spec!
    expect(spec.nodeName).toBe('laptop')
    expect(spec.nodeSelector).toBeUndefined()
    expect(spec.affinity).toEqual({podAntiAffinity: {}})
    expect(spec.tolerations).toEqual([
      {key: 'dedicated', operator: 'Equal', value: 'web', effect: 'NoSchedule'},
      {key: 'virtual-kubelet.io/provider', operator: 'Exists', effect: 'NoSchedule'},
    ])
    expect(spec.serviceAccountName).toBe('web')
    expect(spec.volumes).toEqual([
      {name: 'secret', secret: {secretName: 'web-secret'}},
      {name: WorkdirVolume, hostPath: {path: '/home/me/web', type: 'Directory'}},
    ])
    const [app, metrics] = spec.containers
    expect(app).toEqual({
      name: 'app',
      image: 'registry.example/web:1.2',
      imagePullPolicy: 'IfNotPresent',
      command: ['python3', 'server.py'],
      workingDir: '/home/me/web',
      stdin: false,
      tty: false,
      env: [{name: 'MODE', value: 'prod'}],
      envFrom: [{configMapRef: {name: 'web-config'}}],
      volumeMounts: [
        {name: 'secret', mountPath: '/etc/secret'},
        {name: WorkdirVolume, mountPath: '/home/me/web'},
      ],
      ports: [{containerPort: 8080}],
      resources: {limits: {memory: '256Mi'}},
      securityContext: {runAsNonRoot: true},
      readinessProbe: {httpGet: {path: '/ready', port: 8080}},
    })
    // The sidecar and the other container are the template's.
    expect(metrics).toEqual(template().spec!.containers[1])
    expect(spec.initContainers).toEqual(template().spec!.initContainers)
  })

  test('--no-probes drops the readiness probe too; the template itself is left as it was', () => {
    const i = input({probes: false})
    const pod = buildDevPod(i)
    expect(pod.spec!.containers[0].readinessProbe).toBeUndefined()
    expect(pod.spec!.containers[1].readinessProbe).toBeDefined()
    expect(i.workload.template.spec!.containers[0].args).toEqual(['--serve'])
    expect(i.workload.template.spec!.nodeSelector).toEqual({disk: 'ssd'})
  })

  test("from a pod: not its node, hostname, priority value or injected token volume; the name's tail stays within 63 characters", () => {
    const t = template()
    t.spec = {
      ...t.spec!,
      nodeName: 'elsewhere',
      hostname: 'web-0',
      priority: 1000,
      volumes: [...t.spec!.volumes!, {name: 'kube-api-access-7xk2p', projected: {sources: []}}],
      containers: [{name: 'app', image: 'x', volumeMounts: [{name: 'kube-api-access-7xk2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount'}]}],
    }
    const pod = buildDevPod(input({container: undefined}, {ref: {kind: 'pod', name: 'web-0'}, template: t, fromPod: true}))
    expect(pod.spec!.nodeName).toBe('laptop')
    expect(pod.spec!.hostname).toBeUndefined()
    expect(pod.spec!.priority).toBeUndefined()
    expect(pod.spec!.volumes!.map((v) => v.name)).toEqual(['secret', WorkdirVolume])
    expect(pod.spec!.containers[0].volumeMounts).toEqual([{name: WorkdirVolume, mountPath: '/home/me/web'}])
    expect(devPodName('a'.repeat(80), 'x1y2z')).toBe(`${'a'.repeat(53)}-dev-x1y2z`)
    expect(devPodName(`${'a'.repeat(52)}-b`, 'x1y2z')).toBe(`${'a'.repeat(52)}-dev-x1y2z`)
  })

  test("a StatefulSet's volumeClaimTemplates are empty directories in the dev pod, never a replica's claim", () => {
    const t = template()
    t.spec!.containers[0].volumeMounts!.push({name: 'data', mountPath: '/var/lib/data'})
    const pod = buildDevPod(input({}, {ref: {kind: 'statefulset', name: 'db'}, template: t, claimTemplates: ['data', 'secret']}))
    expect(pod.spec!.volumes!.map((v) => [v.name, Object.keys(v).filter((k) => k !== 'name')[0]])).toEqual([
      ['secret', 'secret'],
      ['data', 'emptyDir'],
      [WorkdirVolume, 'hostPath'],
    ])
  })

  test('-c must name a container; without it the template must have only one', () => {
    const spec = template().spec!
    expect(chooseDevContainer(spec, 'metrics', 'deployment/web')).toBe('metrics')
    expect(() => chooseDevContainer(spec, 'nope', 'deployment/web')).toThrow('container "nope" not found in deployment/web: choose one of [app metrics]')
    expect(() => chooseDevContainer(spec, undefined, 'deployment/web')).toThrow('deployment/web has 2 containers: choose the one to run your command with -c (one of [app metrics])')
    expect(chooseDevContainer({containers: [{name: 'only'}]}, undefined, 'job/x')).toBe('only')
  })
})

describe('the node', () => {
  const node = (name: string, vnode: boolean, ready: boolean): V1Node => ({
    metadata: {name, labels: vnode ? {[NodeMarkerLabel]: 'true'} : {}},
    spec: {taints: [Taint]},
    status: {conditions: [{type: 'Ready', status: ready ? 'True' : 'False'}]},
  })

  test('the only Ready vnode node; none, none Ready or several is an error that says what to do', () => {
    expect(chooseNode([node('old', true, false), node('laptop', true, true)], undefined)).toEqual({name: 'laptop', taints: [Taint]})
    expect(() => chooseNode([], undefined)).toThrow('no vnode node in this cluster: start one with `kubectl vnode up`')
    expect(() => chooseNode([node('old', true, false)], undefined)).toThrow('no vnode node is Ready (old): is `kubectl vnode up` running?')
    expect(() => chooseNode([node('a', true, true), node('b', true, true)], undefined)).toThrow('several vnode nodes are Ready (a, b): choose one with --node')
  })

  test('of several Ready vnode nodes, the only one whose up runs on this host; several local ones still need --node', () => {
    const ready = [node('a', true, true), node('b', true, true), node('c', true, false)]
    expect(chooseNode(ready, undefined, new Set(['b', 'c'])).name).toBe('b')
    expect(() => chooseNode(ready, undefined, new Set(['a', 'b']))).toThrow('several vnode nodes are Ready (a, b): choose one with --node')
    expect(() => chooseNode(ready, undefined, new Set(['c']))).toThrow('several vnode nodes are Ready (a, b): choose one with --node')
  })

  test('--node must be a Ready vnode node', () => {
    const nodes = [node('a', true, true), node('b', true, true), node('kubelet', false, true), node('old', true, false)]
    expect(chooseNode(nodes, 'b').name).toBe('b')
    expect(() => chooseNode(nodes, 'kubelet')).toThrow('node "kubelet" is not a vnode node')
    expect(() => chooseNode(nodes, 'old')).toThrow('node "old" is not Ready')
    expect(() => chooseNode(nodes, 'gone')).toThrow('node "gone" not found')
  })

  test("the node's allowed namespaces refuse a dev pod of another namespace before anything is made; * or no annotation allows every one", () => {
    const annotated = (value: string | undefined): V1Node => ({
      ...node('n', true, true),
      metadata: {name: 'n', labels: {[NodeMarkerLabel]: 'true'}, annotations: value === undefined ? {} : {[AllowedNamespacesAnnotation]: value}},
    })
    const strict = chooseNode([annotated('team-a, team-b')], undefined)
    expect(strict.allowedNamespaces).toEqual(['team-a', 'team-b'])
    expect(() => checkNamespaceAllowed(strict, 'team-b')).not.toThrow()
    expect(() => checkNamespaceAllowed(strict, 'default')).toThrow('node "n" runs pods of namespaces team-a, team-b only, not "default"')
    for (const open of [annotated('*'), annotated(undefined)]) expect(() => checkNamespaceAllowed(chooseNode([open], undefined), 'default')).not.toThrow()
  })
})

describe('following the dev pod', () => {
  const pod = (status: V1Pod['status']): V1Pod => ({metadata: {name: 'web-dev-1'}, spec: {containers: []}, status})

  test('a new instance running, a restart and how the one before ended, a waiting reason once', () => {
    const first = podChanges(
      undefined,
      pod({phase: 'Running', containerStatuses: [{name: 'app', containerID: 'vnode://1', restartCount: 0, ready: false, image: '', imageID: '', state: {running: {}}}]}),
      'app',
    )
    expect(first.progress).toEqual([{kind: 'started', container: 'app', restartCount: 0}])
    const crashed = {name: 'app', containerID: 'vnode://1', restartCount: 1, ready: false, image: '', imageID: '', lastState: {terminated: {exitCode: 1, reason: 'Error'}}}
    const waiting = podChanges(first.seen, pod({phase: 'Running', containerStatuses: [{...crashed, state: {waiting: {reason: 'CrashLoopBackOff', message: 'back-off 10s'}}}]}), 'app')
    expect(waiting.progress).toEqual([
      {kind: 'restarted', container: 'app', restartCount: 1, exit: {exitCode: 1, reason: 'Error'}},
      {kind: 'waiting', container: 'app', reason: 'CrashLoopBackOff', message: 'back-off 10s'},
    ])
    expect(podChanges(waiting.seen, pod({phase: 'Running', containerStatuses: [{...crashed, state: {waiting: {reason: 'CrashLoopBackOff'}}}]}), 'app').progress).toEqual([])
    const again = podChanges(waiting.seen, pod({phase: 'Running', containerStatuses: [{...crashed, containerID: 'vnode://2', state: {running: {}}}]}), 'app')
    expect(again.progress).toEqual([{kind: 'started', container: 'app', restartCount: 1}])
    expect(again.end).toBeUndefined()
  })

  test('whose log to read: the instance running or just ended, or while it waits to restart the one before (previous)', () => {
    const base = {name: 'app', restartCount: 1, ready: false, image: '', imageID: ''}
    expect(instanceToRead({...base, containerID: 'vnode://2', state: {running: {}}})).toEqual({id: 'vnode://2', previous: false})
    expect(instanceToRead({...base, containerID: 'vnode://2', state: {terminated: {exitCode: 0}}})).toEqual({id: 'vnode://2', previous: false})
    const waiting = {...base, containerID: 'vnode://2', state: {waiting: {reason: 'CrashLoopBackOff'}}, lastState: {terminated: {exitCode: 4, containerID: 'vnode://2'}}}
    expect(instanceToRead(waiting)).toEqual({id: 'vnode://2', previous: true})
    expect(instanceToRead({...base, state: {waiting: {reason: 'ContainerCreating'}}})).toBeUndefined()
    expect(instanceToRead(undefined)).toBeUndefined()
  })

  test("a terminal phase ends it: the container's exit, or the node's reason when it never ran", () => {
    const done = podChanges(
      undefined,
      pod({phase: 'Failed', containerStatuses: [{name: 'app', containerID: 'vnode://1', restartCount: 0, ready: false, image: '', imageID: '', state: {terminated: {exitCode: 3, reason: 'Error'}}}]}),
      'app',
    )
    expect(done.end).toEqual({kind: 'exited', exit: {exitCode: 3, reason: 'Error'}})
    const refused = podChanges(undefined, pod({phase: 'Failed', reason: 'NamespaceNotAllowed', message: 'namespace "x" may not run pods on node "n"'}), 'app')
    expect(refused.end).toEqual({kind: 'failed', reason: 'NamespaceNotAllowed', message: 'namespace "x" may not run pods on node "n"'})
    const deleted = {
      ...pod({phase: 'Failed', containerStatuses: [{name: 'app', containerID: 'vnode://1', restartCount: 0, ready: false, image: '', imageID: '', state: {terminated: {exitCode: 143}}}]}),
    }
    deleted.metadata!.deletionTimestamp = new Date()
    expect(podChanges(undefined, deleted, 'app').end).toEqual({kind: 'gone'})
  })
})

describe('flags and saved state', () => {
  test('--port LOCAL:POD or PORT', () => {
    expect(parsePortMapping('9229:9229')).toEqual({local: 9229, pod: 9229})
    expect(parsePortMapping('18080:8080')).toEqual({local: 18080, pod: 8080})
    expect(parsePortMapping('5678')).toEqual({local: 5678, pod: 5678})
    for (const bad of ['0:80', '80:70000', 'a:b', '80:', ':80', '1:2:3']) expect(() => parsePortMapping(bad)).toThrow(`invalid --port "${bad}"`)
  })

  test('the saved scale on a replaced workload: JSON with whole replicas, anything else is none', () => {
    expect(parseSavedScale({[DevReplacedAnnotation]: '{"replicas":3,"pod":"web-dev-1","at":"2026-01-01T00:00:00Z"}'})).toEqual({replicas: 3, pod: 'web-dev-1', at: '2026-01-01T00:00:00Z'})
    expect(parseSavedScale({[DevReplacedAnnotation]: '{"replicas":0}'})).toEqual({replicas: 0, pod: '', at: ''})
    for (const bad of ['', 'x', '{"replicas":-1}', '{"replicas":1.5}', '{"replicas":"2"}']) expect(parseSavedScale({[DevReplacedAnnotation]: bad})).toBeUndefined()
    expect(parseSavedScale(undefined)).toBeUndefined()
  })
})

describe("dev's lines", () => {
  test("the container's log as it is on stdout; dev's steps on stderr, a restart with its reason", () => {
    expect(devLine({kind: 'log', line: 'serving on 8080'}, false)).toEqual({stream: 'out', text: 'serving on 8080'})
    expect(devLine({kind: 'restarted', container: 'app', restartCount: 2, files: ['a.py', 'b.py', 'c.py', 'd.py']}, false)).toEqual({
      stream: 'err',
      text: '[dev] container app restarted (restart 2): a.py, b.py, c.py and 1 more changed',
    })
    expect(devLine({kind: 'restarted', container: 'app', restartCount: 1, exit: {exitCode: 137, reason: 'OOMKilled'}}, false)!.text).toBe(
      '[dev] container app restarted (restart 1): exited with code 137 (OOMKilled)',
    )
    expect(devLine({kind: 'scaled-down', workload: 'deployment/web', replicas: 3, earlier: false, autoscalers: ['web']}, false)!.text).toBe(
      '[dev] deployment/web scaled to 0 (was 3; `kubectl vnode dev --restore deployment/web` puts it back if dev is killed)\n' +
        '[dev] horizontalpodautoscaler/web targets deployment/web: it pauses at 0 replicas and resumes when the scale is restored',
    )
    expect(devLine({kind: 'restore', workload: 'deployment/web', outcome: {kind: 'kept', replicas: 5, saved: 3}}, false)!.text).toBe(
      '[dev] deployment/web was scaled to 5 meanwhile: left so (the saved 3 dropped)',
    )
    expect(devLine({kind: 'failed', reason: 'NamespaceNotAllowed', message: 'no'}, false)).toEqual({stream: 'err', text: 'error: the pod failed before its container ran: NamespaceNotAllowed: no'})
    expect(argvText(['python3', '-c', "print('hi there')", '--port=80'])).toBe(`python3 -c 'print('\\''hi there'\\'')' --port=80`)
  })
})

import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {NODE} from './faults-helpers.js'

/**
 * Unusual but API-valid pod specs, each with the one outcome the node must
 * report for it (the kubelet's reason), and the event that says why.
 */
export type Expectation =
  | {container: string; waiting: string; message?: RegExp}
  | {container: string; terminated: string; exitCode?: number; message?: RegExp}
  | {container: string; running: true; ready?: boolean}
  | {phase: 'Failed'; reason: string}

export interface BadInputCase {
  name: string
  pod: V1Pod
  expect: Expectation
  /** The reason of an event about this pod. */
  event: string
  /** Created (and running) before the others: it owns a resource the next one wants. */
  first?: boolean
}

export interface CorpusContext {
  node: string
  ns: string
  /** A file without the execute bit. */
  noExec: string
  /** A loopback port nothing listens on. */
  closedPort: number
  /** A free host port the `hostport-a` pod takes. */
  hostPort: number
  /** A ConfigMap that exists, with key `present`. */
  configMap: string
}

const exit0 = (script = '') => [NODE, '-e', `${script};process.exit(0)`]

export function corpus(ctx: CorpusContext): BadInputCase[] {
  const pod = (name: string, containers: V1Container[], spec: Partial<V1Pod['spec']> = {}, meta: Partial<V1Pod['metadata']> = {}): V1Pod => ({
    metadata: {name, namespace: ctx.ns, ...meta},
    spec: {nodeName: ctx.node, automountServiceAccountToken: false, restartPolicy: 'Never', terminationGracePeriodSeconds: 1, containers, ...spec},
  })
  const c = (command: string[], extra: Partial<V1Container> = {}): V1Container => ({name: 'app', image: 'node:test', command, ...extra})
  const done = (container = 'app'): Expectation => ({container, terminated: 'Completed', exitCode: 0})
  const longName = `long-${'x'.repeat(248)}`
  const cases: BadInputCase[] = [
    // ---- images and programs ----
    {name: 'unmapped-image', pod: pod('unmapped-image', [{name: 'app', image: 'registry.invalid/nothing:1'}]), expect: {container: 'app', waiting: 'CreateContainerError'}, event: 'Failed'},
    {
      name: 'unmapped-image-args',
      pod: pod('unmapped-image-args', [{name: 'app', image: 'registry.invalid/nothing-with-args:1', args: ['echo', 'hi']}]),
      expect: {container: 'app', waiting: 'CreateContainerError'},
      event: 'Failed',
    },
    {
      name: 'missing-binary',
      pod: pod('missing-binary', [c(['/nonexistent/bin/app'])]),
      expect: {container: 'app', terminated: 'StartError', exitCode: 128, message: /no such file|not found/},
      event: 'Failed',
    },
    {
      name: 'missing-binary-on-path',
      pod: pod('missing-binary-on-path', [c(['no-such-program-anywhere'])]),
      expect: {container: 'app', terminated: 'StartError', exitCode: 128, message: /executable file not found/},
      event: 'Failed',
    },
    {name: 'not-executable', pod: pod('not-executable', [c([ctx.noExec])]), expect: {container: 'app', terminated: 'StartError', exitCode: 128, message: /permission denied/}, event: 'Failed'},
    {name: 'directory-as-binary', pod: pod('directory-as-binary', [c(['/tmp'])]), expect: {container: 'app', terminated: 'StartError', exitCode: 128}, event: 'Failed'},
    {
      name: 'missing-workdir',
      pod: pod('missing-workdir', [c(exit0(), {workingDir: '/nonexistent/work/dir'})]),
      expect: {container: 'app', terminated: 'StartError', exitCode: 128, message: /chdir/},
      event: 'Failed',
    },
    {name: 'image-pull-always', pod: pod('image-pull-always', [c(exit0(), {image: 'ghcr.io/none/none:latest', imagePullPolicy: 'Always'})]), expect: done(), event: 'Started'},
    // ---- exits ----
    {name: 'exit-255', pod: pod('exit-255', [c([NODE, '-e', 'process.exit(255)'])]), expect: {container: 'app', terminated: 'Error', exitCode: 255}, event: 'Started'},
    {name: 'self-sigkill', pod: pod('self-sigkill', [c([NODE, '-e', "process.kill(process.pid,'SIGKILL')"])]), expect: {container: 'app', terminated: 'Error', exitCode: 137}, event: 'Started'},
    {
      name: 'huge-termination-message',
      pod: pod('huge-termination-message', [c([NODE, '-e', "require('fs').writeFileSync(process.env.VNODE_VOLUME_ROOT+'/dev/termination-log','m'.repeat(100000))"])]),
      expect: {container: 'app', terminated: 'Completed', exitCode: 0, message: /^m{4096}$/},
      event: 'Started',
    },
    {
      name: 'fallback-to-logs',
      pod: pod('fallback-to-logs', [c([NODE, '-e', "console.log('the last words');process.exit(2)"], {terminationMessagePolicy: 'FallbackToLogsOnError'})]),
      expect: {container: 'app', terminated: 'Error', exitCode: 2, message: /the last words/},
      event: 'Started',
    },
    {name: 'closes-stdout', pod: pod('closes-stdout', [c([NODE, '-e', "require('fs').closeSync(1);require('fs').closeSync(2);setTimeout(()=>{},300)"])]), expect: done(), event: 'Started'},
    {name: 'long-line', pod: pod('long-line', [c([NODE, '-e', "process.stdout.write('y'.repeat(200000))"])]), expect: done(), event: 'Started'},
    {name: 'binary-output', pod: pod('binary-output', [c([NODE, '-e', 'process.stdout.write(Buffer.from([0,255,254,10,0xc3,0x28,10]))'])]), expect: done(), event: 'Started'},
    // ---- env and args ----
    {
      name: 'huge-env',
      pod: pod('huge-env', [c(exit0('if(Object.keys(process.env).length<600)process.exit(9)'), {env: Array.from({length: 600}, (_, i) => ({name: `VAR_${i}`, value: 'v'.repeat(200)}))})]),
      expect: done(),
      event: 'Started',
    },
    {
      name: 'env-too-big-for-exec',
      pod: pod('env-too-big-for-exec', [c(exit0(), {env: [{name: 'BIG', value: 'b'.repeat(200_000)}]})]),
      expect: {container: 'app', terminated: 'StartError', exitCode: 128},
      event: 'Failed',
    },
    {name: 'many-args', pod: pod('many-args', [c([NODE, '-e', 'process.exit(process.argv.length>=5000?0:9)', ...Array.from({length: 5000}, (_, i) => `a${i}`)])]), expect: done(), event: 'Started'},
    {
      name: 'unicode-values',
      pod: pod(
        'unicode-values',
        [
          c(exit0("if(process.env.GREETING!=='héllo wörld ✓ 日本語 🚀'||process.argv[1]!=='ünïcødé')process.exit(9)"), {
            args: ['ünïcødé'],
            env: [{name: 'GREETING', value: 'héllo wörld ✓ 日本語 🚀'}],
          }),
        ],
        {},
        {labels: {app: 'x'}, annotations: {note: 'ünïcødé 🚀'}},
      ),
      expect: done(),
      event: 'Started',
    },
    {name: 'unknown-expansion', pod: pod('unknown-expansion', [c([NODE, '-e', "process.exit(process.argv[1]==='$(NOPE)'?0:9)", '$(NOPE)'])]), expect: done(), event: 'Started'},
    {
      name: 'empty-env-name-ref',
      pod: pod('empty-env-name-ref', [
        c(exit0(), {
          env: [
            {name: 'A', value: '$(B)$(C)'},
            {name: 'B', value: ''},
          ],
        }),
      ]),
      expect: done(),
      event: 'Started',
    },
    {
      name: 'missing-cm-key',
      pod: pod('missing-cm-key', [c(exit0(), {env: [{name: 'K', valueFrom: {configMapKeyRef: {name: ctx.configMap, key: 'absent'}}}]})]),
      expect: {container: 'app', waiting: 'CreateContainerConfigError', message: /couldn't find key absent/},
      event: 'Failed',
    },
    {
      name: 'missing-cm-key-optional',
      pod: pod('missing-cm-key-optional', [c(exit0(), {env: [{name: 'K', valueFrom: {configMapKeyRef: {name: ctx.configMap, key: 'absent', optional: true}}}]})]),
      expect: done(),
      event: 'Started',
    },
    {
      name: 'missing-cm',
      pod: pod('missing-cm', [c(exit0(), {envFrom: [{configMapRef: {name: 'no-such-configmap'}}]})]),
      expect: {container: 'app', waiting: 'CreateContainerConfigError'},
      event: 'Failed',
    },
    {
      name: 'missing-secret-key',
      pod: pod('missing-secret-key', [c(exit0(), {env: [{name: 'S', valueFrom: {secretKeyRef: {name: 'no-such-secret', key: 'k'}}}]})]),
      expect: {container: 'app', waiting: 'CreateContainerConfigError'},
      event: 'Failed',
    },
    {
      name: 'missing-label-fieldref',
      pod: pod('missing-label-fieldref', [c(exit0("if(process.env.L!=='')process.exit(9)"), {env: [{name: 'L', valueFrom: {fieldRef: {fieldPath: "metadata.labels['absent']"}}}]})]),
      expect: done(),
      event: 'Started',
    },
    // ---- names ----
    {name: 'max-length-name', pod: pod(longName, [c(exit0("console.log('hello from a long name')"))]), expect: done(), event: 'Started'},
    {name: 'max-length-container', pod: pod('max-length-container', [c(exit0(), {name: `c${'z'.repeat(62)}`})]), expect: done(`c${'z'.repeat(62)}`), event: 'Started'},
    {
      name: 'many-containers',
      pod: pod(
        'many-containers',
        Array.from({length: 20}, (_, i) => c(exit0(), {name: `c${i}`})),
      ),
      expect: done('c19'),
      event: 'Started',
    },
    // ---- probes and hooks ----
    {
      name: 'readiness-closed-port',
      pod: pod('readiness-closed-port', [c([NODE, '-e', 'setInterval(()=>{},1000)'], {readinessProbe: {tcpSocket: {port: ctx.closedPort}, periodSeconds: 1}})]),
      expect: {container: 'app', running: true, ready: false},
      event: 'Unhealthy',
    },
    {
      name: 'liveness-closed-port',
      pod: pod('liveness-closed-port', [
        c([NODE, '-e', "process.on('SIGTERM',()=>process.exit(143));setInterval(()=>{},1000)"], {livenessProbe: {tcpSocket: {port: ctx.closedPort}, periodSeconds: 1, failureThreshold: 1}}),
      ]),
      expect: {container: 'app', terminated: 'Error', exitCode: 143},
      event: 'Unhealthy',
    },
    {
      name: 'http-probe-closed-port',
      pod: pod('http-probe-closed-port', [c([NODE, '-e', 'setInterval(()=>{},1000)'], {readinessProbe: {httpGet: {path: '/', port: ctx.closedPort}, periodSeconds: 1}})]),
      expect: {container: 'app', running: true, ready: false},
      event: 'Unhealthy',
    },
    {
      name: 'exec-probe-missing-binary',
      pod: pod('exec-probe-missing-binary', [c([NODE, '-e', 'setInterval(()=>{},1000)'], {readinessProbe: {exec: {command: ['/nonexistent/probe']}, periodSeconds: 1}})]),
      expect: {container: 'app', running: true, ready: false},
      event: 'Unhealthy',
    },
    {
      name: 'startup-never-succeeds',
      pod: pod('startup-never-succeeds', [
        c([NODE, '-e', "process.on('SIGTERM',()=>process.exit(143));setInterval(()=>{},1000)"], {startupProbe: {tcpSocket: {port: ctx.closedPort}, periodSeconds: 1, failureThreshold: 1}}),
      ]),
      expect: {container: 'app', terminated: 'Error', exitCode: 143},
      event: 'Unhealthy',
    },
    {
      name: 'poststart-fails',
      pod: pod('poststart-fails', [c([NODE, '-e', "process.on('SIGTERM',()=>process.exit(143));setInterval(()=>{},1000)"], {lifecycle: {postStart: {exec: {command: ['/nonexistent/hook']}}}})]),
      expect: {container: 'app', terminated: 'Error', exitCode: 143},
      event: 'FailedPostStartHook',
    },
    // ---- ports and admission ----
    {
      name: 'hostport-a',
      first: true,
      pod: pod('hostport-a', [c([NODE, '-e', 'setInterval(()=>{},1000)'], {ports: [{containerPort: ctx.hostPort, hostPort: ctx.hostPort}]})]),
      expect: {container: 'app', running: true, ready: true},
      event: 'Started',
    },
    {name: 'hostport-b', pod: pod('hostport-b', [c(exit0(), {ports: [{containerPort: ctx.hostPort, hostPort: ctx.hostPort}]})]), expect: {phase: 'Failed', reason: 'NodePorts'}, event: 'NodePorts'},
    {name: 'too-much-cpu', pod: pod('too-much-cpu', [c(exit0(), {resources: {requests: {cpu: '100000'}}})]), expect: {phase: 'Failed', reason: 'OutOfcpu'}, event: 'OutOfcpu'},
    {
      name: 'node-selector-mismatch',
      pod: pod('node-selector-mismatch', [c(exit0())], {nodeSelector: {'no-such-label': 'x'}}),
      expect: {phase: 'Failed', reason: 'NodeAffinity'},
      event: 'NodeAffinity',
    },
    // ---- init containers and deadlines ----
    {
      name: 'init-always-fails',
      pod: pod('init-always-fails', [c(exit0())], {initContainers: [c([NODE, '-e', 'process.exit(1)'], {name: 'init'})]}),
      expect: {container: 'init', terminated: 'Error', exitCode: 1},
      event: 'Started',
    },
    {
      name: 'init-fails-main-waits',
      pod: pod('init-fails-main-waits', [c(exit0())], {initContainers: [c([NODE, '-e', 'process.exit(1)'], {name: 'init'})]}),
      expect: {container: 'app', waiting: 'PodInitializing'},
      event: 'Started',
    },
    {
      name: 'active-deadline',
      pod: pod('active-deadline', [c([NODE, '-e', 'setInterval(()=>{},1000)'])], {activeDeadlineSeconds: 1}),
      expect: {phase: 'Failed', reason: 'DeadlineExceeded'},
      event: 'DeadlineExceeded',
    },
    {name: 'zero-grace', pod: pod('zero-grace', [c(exit0())], {terminationGracePeriodSeconds: 0}), expect: done(), event: 'Started'},
    {name: 'huge-grace', pod: pod('huge-grace', [c(exit0())], {terminationGracePeriodSeconds: 2_000_000_000}), expect: done(), event: 'Started'},
    // ---- volumes ----
    {
      name: 'unsupported-volume',
      pod: pod('unsupported-volume', [c(exit0(), {volumeMounts: [{name: 'data', mountPath: '/data'}]})], {volumes: [{name: 'data', persistentVolumeClaim: {claimName: 'nope'}}]}),
      expect: {container: 'app', waiting: 'ContainerCreating'},
      event: 'FailedMount',
    },
    {
      name: 'missing-secret-volume',
      pod: pod('missing-secret-volume', [c(exit0(), {volumeMounts: [{name: 's', mountPath: '/s'}]})], {volumes: [{name: 's', secret: {secretName: 'no-such-secret'}}]}),
      expect: {container: 'app', waiting: 'ContainerCreating'},
      event: 'FailedMount',
    },
    {
      name: 'nested-mounts',
      pod: pod(
        'nested-mounts',
        [
          c(exit0("const r=process.env.VNODE_VOLUME_ROOT,fs=require('fs');fs.writeFileSync(r+'/a/b/f','x');fs.writeFileSync(r+'/a/g','y')"), {
            volumeMounts: [
              {name: 'a', mountPath: '/a'},
              {name: 'b', mountPath: '/a/b'},
            ],
          }),
        ],
        {
          volumes: [
            {name: 'a', emptyDir: {}},
            {name: 'b', emptyDir: {}},
          ],
        },
      ),
      expect: done(),
      event: 'Started',
    },
    {
      name: 'subpath-expr-escape',
      pod: pod('subpath-expr-escape', [c(exit0(), {env: [{name: 'UP', value: '..'}], volumeMounts: [{name: 'a', mountPath: '/a', subPathExpr: '$(UP)/$(UP)'}]})], {
        volumes: [{name: 'a', emptyDir: {}}],
      }),
      expect: {container: 'app', waiting: 'CreateContainerConfigError'},
      event: 'Failed',
    },
    {
      name: 'same-volume-twice',
      pod: pod(
        'same-volume-twice',
        [
          c(exit0("const r=process.env.VNODE_VOLUME_ROOT,fs=require('fs');fs.writeFileSync(r+'/one/f','x');if(fs.readFileSync(r+'/two/f','utf8')!=='x')process.exit(9)"), {
            volumeMounts: [
              {name: 'a', mountPath: '/one'},
              {name: 'a', mountPath: '/two'},
            ],
          }),
        ],
        {volumes: [{name: 'a', emptyDir: {}}]},
      ),
      expect: done(),
      event: 'Started',
    },
  ]
  return cases
}

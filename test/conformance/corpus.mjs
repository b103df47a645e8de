// The conformance corpus: pod specs run unchanged on the reference kubelet and
// on vnode. Every container runs busybox by absolute path (/bin/busybox is the
// image's busybox on the kubelet and the host's, the same Debian build, on
// vnode), so both run the same program. `$$` is Kubernetes' escape for `$`.
import {BusyboxImage} from './images.mjs'

const bb = (...args) => ['/bin/busybox', ...args]
const sh = (script) => bb('sh', '-c', script)
const c = (name, command, extra = {}) => ({name, image: BusyboxImage, imagePullPolicy: 'Never', command, ...extra})
const pod = (containers, extra = {}) => ({containers, terminationGracePeriodSeconds: 5, ...extra})
const execProbe = (script, extra = {}) => ({exec: {command: sh(script)}, periodSeconds: 2, failureThreshold: 2, ...extra})

/** ConfigMaps and Secrets the corpus refers to (present ones only; the missing ones stay missing). */
export const Fixtures = {
  configMaps: [{metadata: {name: 'present-cm'}, data: {greeting: 'hello', 'file.txt': 'from a configmap\n'}}],
  secrets: [{metadata: {name: 'present-secret'}, stringData: {token: 's3cret'}}],
}

/**
 * Each spec: name, spec (the PodSpec without nodeName), and when to delete it
 * (`deleteAfter` seconds after creation; the rest are deleted when the window ends),
 * with `gracePeriodSeconds` for the delete and `forceAfter` seconds after it for a
 * second, forced delete (grace 0). `logs` is what each named container must have
 * written: a spec named after content is checked on what the container saw.
 * `ports` hands out ports nobody listens on, for the probe servers: on vnode every
 * pod shares the host network, so each server needs a port of its own.
 */
export function corpus(ports) {
  const p = () => ports.shift()
  const httpPort = p()
  const tcpPort = p()
  // A probe that kills its container: where in its kill cycle each node's container is at the delete is that node's
  // own clock (probe-kill-restart). A kill under way runs out its grace first (the kubelet's SyncPod is not
  // cancelled), sleep ignoring SIGTERM as PID 1, so the probe's own 1 s grace (2 s, the kill's minimum) and the
  // delete's 1 s keep delete-to-gone within the time-gone tolerance on both nodes, where the pod's 5 s would decide
  // the comparison.
  const probeKillDelete = {gracePeriodSeconds: 1}
  const killGrace = {terminationGracePeriodSeconds: 1}
  const specs = [
    // Exit codes under each restartPolicy.
    ['exit0-never', pod([c('c', sh('exit 0'))], {restartPolicy: 'Never'})],
    ['exit1-never', pod([c('c', sh('exit 1'))], {restartPolicy: 'Never'})],
    ['exit42-never', pod([c('c', sh('exit 42'))], {restartPolicy: 'Never'})],
    ['exit0-onfailure', pod([c('c', sh('exit 0'))], {restartPolicy: 'OnFailure'})],
    ['exit1-onfailure', pod([c('c', sh('exit 1'))], {restartPolicy: 'OnFailure'})],
    ['exit0-always', pod([c('c', sh('exit 0'))], {restartPolicy: 'Always'})],
    ['exit3-always', pod([c('c', sh('exit 3'))], {restartPolicy: 'Always'})],
    ['running-always', pod([c('c', bb('sleep', '3600'))])],
    ['selfkill-never', pod([c('c', sh('kill -9 $$$$'))], {restartPolicy: 'Never'})],
    ['output-then-exit', pod([c('c', sh('echo out; sleep 1; exit 2'))], {restartPolicy: 'Never'}), {logs: {c: 'out\n'}}],
    // Init and sidecar containers.
    ['init-ok', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('init', sh('exit 0'))]})],
    ['init-two', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('a', sh('sleep 1')), c('b', sh('exit 0'))]})],
    ['init-fail-never', pod([c('c', bb('sleep', '3600'))], {restartPolicy: 'Never', initContainers: [c('init', sh('exit 7'))]})],
    ['init-fail-always', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('init', sh('exit 1'))]})],
    ['sidecar-running', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('side', bb('sleep', '3600'), {restartPolicy: 'Always'})]})],
    ['sidecar-job', pod([c('c', sh('sleep 2; exit 0'))], {restartPolicy: 'Never', initContainers: [c('side', sh('trap "exit 0" TERM; while true; do sleep 1; done'), {restartPolicy: 'Always'})]})],
    ['sidecar-startup-probe', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('side', bb('sleep', '3600'), {restartPolicy: 'Always', startupProbe: execProbe('true', {periodSeconds: 1})})]})],
    // ConfigMaps and Secrets: present, missing, optional, in env and volumes.
    ['cm-env-present', pod([c('c', sh('echo $$G; exec /bin/busybox sleep 3600'), {env: [{name: 'G', valueFrom: {configMapKeyRef: {name: 'present-cm', key: 'greeting'}}}]})]), {logs: {c: 'hello\n'}}],
    ['cm-env-missing', pod([c('c', bb('sleep', '3600'), {env: [{name: 'G', valueFrom: {configMapKeyRef: {name: 'absent-cm', key: 'greeting'}}}]})])],
    ['cm-env-missing-key', pod([c('c', bb('sleep', '3600'), {env: [{name: 'G', valueFrom: {configMapKeyRef: {name: 'present-cm', key: 'absent'}}}]})])],
    ['cm-env-optional', pod([c('c', bb('sleep', '3600'), {env: [{name: 'G', valueFrom: {configMapKeyRef: {name: 'absent-cm', key: 'greeting', optional: true}}}]})])],
    ['cm-envfrom-missing', pod([c('c', bb('sleep', '3600'), {envFrom: [{configMapRef: {name: 'absent-cm'}}]})])],
    ['cm-envfrom-optional', pod([c('c', bb('sleep', '3600'), {envFrom: [{configMapRef: {name: 'absent-cm', optional: true}}]})])],
    ['secret-env-missing', pod([c('c', bb('sleep', '3600'), {env: [{name: 'T', valueFrom: {secretKeyRef: {name: 'absent-secret', key: 'token'}}}]})])],
    ['secret-env-optional', pod([c('c', bb('sleep', '3600'), {env: [{name: 'T', valueFrom: {secretKeyRef: {name: 'absent-secret', key: 'token', optional: true}}}]})])],
    [
      'secret-env-present',
      pod([c('c', sh('echo $$T; exec /bin/busybox sleep 3600'), {env: [{name: 'T', valueFrom: {secretKeyRef: {name: 'present-secret', key: 'token'}}}]})]),
      {logs: {c: 's3cret\n'}},
    ],
    [
      'cm-volume-present',
      pod([c('c', sh('cat /cfg/file.txt /cfg/greeting; echo; exec /bin/busybox sleep 3600'), {volumeMounts: [{name: 'v', mountPath: '/cfg'}]})], {
        volumes: [{name: 'v', configMap: {name: 'present-cm'}}],
      }),
      {logs: {c: 'from a configmap\nhello\n'}},
    ],
    ['cm-volume-missing', pod([c('c', bb('sleep', '3600'), {volumeMounts: [{name: 'v', mountPath: '/cfg'}]})], {volumes: [{name: 'v', configMap: {name: 'absent-cm'}}]})],
    ['cm-volume-optional', pod([c('c', bb('sleep', '3600'), {volumeMounts: [{name: 'v', mountPath: '/cfg'}]})], {volumes: [{name: 'v', configMap: {name: 'absent-cm', optional: true}}]})],
    [
      'secret-volume-present',
      pod([c('c', sh('cat /sec/token; echo; exec /bin/busybox sleep 3600'), {volumeMounts: [{name: 'v', mountPath: '/sec'}]})], {volumes: [{name: 'v', secret: {secretName: 'present-secret'}}]}),
      {logs: {c: 's3cret\n'}},
    ],
    ['secret-volume-missing', pod([c('c', bb('sleep', '3600'), {volumeMounts: [{name: 'v', mountPath: '/sec'}]})], {volumes: [{name: 'v', secret: {secretName: 'absent-secret'}}]})],
    ['secret-volume-optional', pod([c('c', bb('sleep', '3600'), {volumeMounts: [{name: 'v', mountPath: '/sec'}]})], {volumes: [{name: 'v', secret: {secretName: 'absent-secret', optional: true}}]})],
    [
      'emptydir',
      pod([c('c', sh('echo x > /data/x && cat /data/x && ls -A /data; exec /bin/busybox sleep 3600'), {volumeMounts: [{name: 'd', mountPath: '/data'}]})], {volumes: [{name: 'd', emptyDir: {}}]}),
      {logs: {c: 'x\nx\n'}},
    ],
    // Probes, failing and passing.
    ['liveness-exec-pass', pod([c('c', bb('sleep', '3600'), {livenessProbe: execProbe('true')})])],
    // Probe kills every 3-4 s: each restart's back-off verdict is seconds from its boundary, not milliseconds (a kill cycle equal to a back-off step leaves each node's clock to decide).
    ['liveness-exec-fail', pod([c('c', bb('sleep', '3600'), {livenessProbe: execProbe('exit 1', {periodSeconds: 1, failureThreshold: 3, ...killGrace})})]), probeKillDelete],
    ['readiness-exec-pass', pod([c('c', bb('sleep', '3600'), {readinessProbe: execProbe('true')})])],
    ['readiness-exec-fail', pod([c('c', bb('sleep', '3600'), {readinessProbe: execProbe('echo not ready; exit 1')})])],
    ['startup-exec-pass', pod([c('c', bb('sleep', '3600'), {startupProbe: execProbe('true', {periodSeconds: 1})})])],
    ['startup-exec-fail', pod([c('c', bb('sleep', '3600'), {startupProbe: execProbe('exit 1', {periodSeconds: 1, failureThreshold: 3, ...killGrace})})]), probeKillDelete],
    ['readiness-http-pass', pod([c('c', bb('httpd', '-f', '-p', String(httpPort), '-h', '/'), {readinessProbe: {httpGet: {path: '/', port: httpPort}, periodSeconds: 2}})])],
    ['readiness-http-fail', pod([c('c', bb('sleep', '3600'), {readinessProbe: {httpGet: {path: '/', port: p()}, periodSeconds: 2, failureThreshold: 2}})])],
    // A TCP listener that stays: busybox's httpd (Debian's nc has no -k, it would exit after one connection).
    ['readiness-tcp-pass', pod([c('c', bb('httpd', '-f', '-p', String(tcpPort), '-h', '/'), {readinessProbe: {tcpSocket: {port: tcpPort}, periodSeconds: 2}})])],
    ['liveness-tcp-fail', pod([c('c', bb('sleep', '3600'), {livenessProbe: {tcpSocket: {port: p()}, periodSeconds: 1, failureThreshold: 3, ...killGrace}})]), probeKillDelete],
    // Lifecycle hooks.
    ['poststart-ok', pod([c('c', bb('sleep', '3600'), {lifecycle: {postStart: {exec: {command: bb('true')}}}})])],
    ['poststart-fail', pod([c('c', bb('sleep', '3600'), {lifecycle: {postStart: {exec: {command: bb('false')}}}})])],
    ['prestop-ok', pod([c('c', sh('trap "exit 0" TERM; while true; do sleep 1; done'), {lifecycle: {preStop: {exec: {command: bb('true')}}}})]), 15],
    // Deletes of processes that trap or ignore SIGTERM.
    ['delete-trap-term', pod([c('c', sh('trap "exit 0" TERM; while true; do sleep 1; done'))]), 15],
    ['delete-ignore-term', pod([c('c', sh('trap "" TERM; while true; do sleep 1; done'))], {terminationGracePeriodSeconds: 3}), 15],
    ['delete-plain-sleep', pod([c('c', bb('sleep', '3600'))], {terminationGracePeriodSeconds: 3}), 15],
    ['delete-force', pod([c('c', sh('trap "exit 0" TERM; while true; do sleep 1; done'))]), {deleteAfter: 15, gracePeriodSeconds: 0}],
    // activeDeadlineSeconds.
    ['active-deadline', pod([c('c', bb('sleep', '3600'))], {activeDeadlineSeconds: 5, terminationGracePeriodSeconds: 2})],
    // Termination messages.
    ['termination-message-file', pod([c('c', sh('echo -n bye > /dev/termination-log; exit 1'))], {restartPolicy: 'Never'})],
    ['termination-fallback-logs', pod([c('c', sh('echo last words; exit 1'), {terminationMessagePolicy: 'FallbackToLogsOnError'})], {restartPolicy: 'Never'}), {logs: {c: 'last words\n'}}],
    ['termination-fallback-ok', pod([c('c', sh('echo fine; exit 0'), {terminationMessagePolicy: 'FallbackToLogsOnError'})], {restartPolicy: 'Never'})],
    // Downward API.
    [
      'downward-env',
      pod([
        c('c', sh('echo $$N $$L; exec /bin/busybox sleep 3600'), {
          env: [
            {name: 'N', valueFrom: {fieldRef: {fieldPath: 'metadata.name'}}},
            {name: 'L', valueFrom: {resourceFieldRef: {resource: 'limits.memory'}}},
          ],
          resources: {limits: {memory: '64Mi'}},
        }),
      ]),
      {logs: {c: 'downward-env 67108864\n'}},
    ],
    [
      'downward-volume',
      pod([c('c', sh('cat /info/labels; echo; exec /bin/busybox sleep 3600'), {volumeMounts: [{name: 'info', mountPath: '/info'}]})], {
        volumes: [{name: 'info', downwardAPI: {items: [{path: 'labels', fieldRef: {fieldPath: 'metadata.labels'}}]}}],
      }),
      {logs: {c: 'spec="downward-volume"\n'}},
    ],
    // Resource limits.
    ['resources-guaranteed', pod([c('c', bb('sleep', '3600'), {resources: {requests: {cpu: '100m', memory: '32Mi'}, limits: {cpu: '100m', memory: '32Mi'}}})])],
    ['resources-burstable', pod([c('c', bb('sleep', '3600'), {resources: {requests: {cpu: '50m', memory: '16Mi'}}})])],
    // Many containers.
    ['many-containers', pod(Array.from({length: 6}, (_, i) => c(`c${i}`, bb('sleep', '3600'))))],
    ['mixed-containers', pod([c('ok', bb('sleep', '3600')), c('bad', sh('exit 1'))])],
    // Images that cannot run.
    ['missing-binary', pod([c('c', ['/no/such/program'])], {restartPolicy: 'Never'})],
    ['not-executable', pod([c('c', ['/etc/passwd'])], {restartPolicy: 'Never'})],
    ['image-never-absent', pod([{name: 'c', image: 'docker.io/library/absent:1.0', imagePullPolicy: 'Never', command: bb('sleep', '3600')}])],
    // The image's own ENTRYPOINT/CMD, args, env expansion, working directory.
    ['image-entrypoint-args', pod([{name: 'c', image: BusyboxImage, imagePullPolicy: 'Never', args: ['sh', '-c', 'echo $$HOME; exit 0']}], {restartPolicy: 'Never'}), {logs: {c: '/root\n'}}],
    [
      'env-expansion',
      pod(
        [
          c('c', sh('echo $(A)-$(B); exit 0'), {
            env: [
              {name: 'A', value: 'a'},
              {name: 'B', value: '$(A)b'},
            ],
          }),
        ],
        {restartPolicy: 'Never'},
      ),
      {logs: {c: 'a-ab\n'}},
    ],
    ['workingdir', pod([c('c', sh('pwd; exit 0'), {workingDir: '/tmp'})], {restartPolicy: 'Never'}), {logs: {c: '/tmp\n'}}],
    // securityContext: each container exits 0 when it runs as the spec says, with a code of its own otherwise.
    ['sc-runasuser', pod([c('c', sh('test "$$(id -u):$$(id -g)" = 1000:3000 || exit 3'))], {restartPolicy: 'Never', securityContext: {runAsUser: 1000, runAsGroup: 3000}})],
    ['sc-runasnonroot-refused', pod([c('c', bb('sleep', '3600'))], {securityContext: {runAsNonRoot: true}})],
    ['sc-readonly-rootfs', pod([c('c', sh('touch /rofs-probe || exit 4'), {securityContext: {readOnlyRootFilesystem: true}})], {restartPolicy: 'Never'})],
    ['sc-capabilities-default', pod([c('c', sh('grep -q "^CapEff:[[:space:]]*00000000a80425fb$$" /proc/self/status || exit 5'))], {restartPolicy: 'Never'})],
    [
      'sc-capabilities-drop',
      pod([c('c', sh('grep -q "^CapEff:[[:space:]]*0000000000000400$$" /proc/self/status || exit 6'), {securityContext: {capabilities: {drop: ['ALL'], add: ['NET_BIND_SERVICE']}}})], {
        restartPolicy: 'Never',
      }),
    ],
    [
      'sc-fsgroup',
      pod([c('c', sh('test "$$(stat -c %g /data)" = 2000 || exit 7'), {volumeMounts: [{name: 'data', mountPath: '/data'}]})], {
        restartPolicy: 'Never',
        securityContext: {runAsUser: 1000, fsGroup: 2000},
        volumes: [{name: 'data', emptyDir: {}}],
      }),
    ],
    // Termination: a preStop hook that outlives the grace period, a force delete while the hook runs.
    ['prestop-hang', pod([c('c', bb('sleep', '3600'), {lifecycle: {preStop: {exec: {command: bb('sleep', '3600')}}}})], {terminationGracePeriodSeconds: 3}), {deleteAfter: 15}],
    ['prestop-hang-force', pod([c('c', bb('sleep', '3600'), {lifecycle: {preStop: {exec: {command: bb('sleep', '3600')}}}})], {terminationGracePeriodSeconds: 30}), {deleteAfter: 15, forceAfter: 2}],
    ['prestop-sleep-within-grace', pod([c('c', sh('trap "exit 0" TERM; while true; do sleep 1; done'), {lifecycle: {preStop: {exec: {command: bb('sleep', '2')}}}})]), {deleteAfter: 15}],
    // PID 1: the shell is PID 1 of the container, so the kernel drops the signals it sends itself without a handler.
    ['pid1-shell', pod([c('c', sh('echo $$$$; exit 0'))], {restartPolicy: 'Never'}), {logs: {c: '1\n'}}],
    ['selfkill-term-never', pod([c('c', sh('kill -TERM $$$$; echo survived; exit 0'))], {restartPolicy: 'Never'}), {logs: {c: 'survived\n'}}],
    // The shell says Killed on stderr, the exit code goes to stdout a second later: two pipes read apart keep no order of their own.
    ['selfkill-child-never', pod([c('c', sh('/bin/busybox sh -c "kill -9 \\$$$$"; r=$$?; sleep 1; echo $$r; exit 0'))], {restartPolicy: 'Never'}), {logs: {c: 'Killed\n137\n'}}],
    // Crash loops seen early: at 3 s and 15 s, each node's back-off and restart count.
    ['crashloop-exit1-always-early', pod([c('c', sh('exit 1'))]), {deleteAfter: 16}],
    ['crashloop-exit2-onfailure-early', pod([c('c', sh('sleep 1; exit 2'))], {restartPolicy: 'OnFailure'}), {deleteAfter: 16}],
    ['crashloop-exit137-always-early', pod([c('c', sh('exit 137'))]), {deleteAfter: 16}],
    ['crashloop-init-always-early', pod([c('c', bb('sleep', '3600'))], {initContainers: [c('init', sh('exit 1'))]}), {deleteAfter: 16}],
    // Ordering: init containers one after the other, a sidecar before the next init container, then the main one.
    [
      'init-sidecar-order',
      pod([c('c', sh('echo c >> /o/order; cat /o/order; exec /bin/busybox sleep 3600'), {volumeMounts: [{name: 'o', mountPath: '/o'}]})], {
        volumes: [{name: 'o', emptyDir: {}}],
        initContainers: [
          c('a', sh('echo a >> /o/order'), {volumeMounts: [{name: 'o', mountPath: '/o'}]}),
          c('s', sh('echo s >> /o/order; exec /bin/busybox sleep 3600'), {restartPolicy: 'Always', volumeMounts: [{name: 'o', mountPath: '/o'}]}),
          c('b', sh('echo b >> /o/order'), {volumeMounts: [{name: 'o', mountPath: '/o'}]}),
        ],
      }),
      {logs: {c: 'a\ns\nb\nc\n'}},
    ],
  ]
  return specs.map(([name, spec, more]) => ({name, spec, ...(typeof more === 'number' ? {deleteAfter: more} : (more ?? {}))}))
}

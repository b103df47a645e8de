import type {V1PodTemplateSpec} from '@kubernetes/client-node'
import {isDnsSubdomain} from '../../common/names.js'
import {isNotFound} from '../../emulator/kube/errors.js'
import {UserError} from '../../errors.js'
import type {KubeSession} from '../session.js'

/** What `dev` can stand in for: a workload with a pod template, or a pod. */
export type WorkloadKind = 'deployment' | 'statefulset' | 'job' | 'pod'

export interface WorkloadRef {
  kind: WorkloadKind
  name: string
}

/** A workload as `dev` uses it: the pod it copies, and for the scalable kinds their replicas. */
export interface Workload {
  ref: WorkloadRef
  template: V1PodTemplateSpec
  /** Deployments and StatefulSets: spec.replicas (1 when unset, as the API defaults it). */
  replicas?: number
  annotations: Record<string, string>
  /** The object's version as read: a write that must not race another names it. */
  resourceVersion?: string
  /** A StatefulSet's volumeClaimTemplates: its pods' volumes of those names are claims the controller makes per replica. */
  claimTemplates?: string[]
  /** A pod was given: its spec is a running instance's (a node, a hostname, injected volumes). */
  fromPod: boolean
}

/** The spellings kubectl accepts for each kind (singular, plural, short name, with the group). */
const KindNames: Record<string, WorkloadKind> = {
  deploy: 'deployment',
  deployment: 'deployment',
  deployments: 'deployment',
  'deployment.apps': 'deployment',
  'deployments.apps': 'deployment',
  sts: 'statefulset',
  statefulset: 'statefulset',
  statefulsets: 'statefulset',
  'statefulset.apps': 'statefulset',
  'statefulsets.apps': 'statefulset',
  job: 'job',
  jobs: 'job',
  'job.batch': 'job',
  'jobs.batch': 'job',
  po: 'pod',
  pod: 'pod',
  pods: 'pod',
}

/** How the API names each kind in its messages (`deployments.apps "web" not found`). */
export const ResourceNames: Record<WorkloadKind, string> = {deployment: 'deployments.apps', statefulset: 'statefulsets.apps', job: 'jobs.batch', pod: 'pods'}

/** `deploy/web`, `statefulset/db`, `job/migrate`, `pod/x` or a bare pod name. */
export function parseWorkloadRef(text: string): WorkloadRef {
  const parts = text.split('/')
  const usage = 'expected deploy/NAME, statefulset/NAME, job/NAME, pod/NAME or a pod name'
  if (parts.length > 2) throw new UserError(`invalid workload "${text}": ${usage}`)
  const [kindText, name] = parts.length === 2 ? parts : ['pod', parts[0]]
  const kind = KindNames[kindText.toLowerCase()]
  if (!kind) throw new UserError(`invalid workload "${text}": unknown kind "${kindText}"; ${usage}`)
  if (!isDnsSubdomain(name)) throw new UserError(`invalid workload "${text}": "${name}" is not a valid ${kind} name`)
  return {kind, name}
}

/** `deployment/web`: how dev names a workload in what it prints and in the annotations it writes. */
export function workloadText(ref: WorkloadRef): string {
  return `${ref.kind}/${ref.name}`
}

/** Reads the workload through the API; one that does not exist is a UserError in the API's words. */
export async function readWorkload(session: KubeSession, namespace: string, ref: WorkloadRef): Promise<Workload> {
  try {
    return await fetchWorkload(session, namespace, ref)
  } catch (error) {
    if (isNotFound(error)) throw new UserError(`${ResourceNames[ref.kind]} "${ref.name}" not found in namespace "${namespace}"`)
    throw error
  }
}

async function fetchWorkload(session: KubeSession, namespace: string, ref: WorkloadRef): Promise<Workload> {
  const {name} = ref
  const base = {ref, fromPod: false}
  switch (ref.kind) {
    case 'deployment': {
      const d = await new session.lib.AppsV1Api(session.config).readNamespacedDeployment({name, namespace})
      return {...base, template: d.spec!.template, replicas: d.spec?.replicas ?? 1, annotations: d.metadata?.annotations ?? {}, resourceVersion: d.metadata?.resourceVersion}
    }
    case 'statefulset': {
      const s = await new session.lib.AppsV1Api(session.config).readNamespacedStatefulSet({name, namespace})
      const claimTemplates = (s.spec?.volumeClaimTemplates ?? []).map((c) => c.metadata!.name!)
      return {...base, template: s.spec!.template, replicas: s.spec?.replicas ?? 1, annotations: s.metadata?.annotations ?? {}, resourceVersion: s.metadata?.resourceVersion, claimTemplates}
    }
    case 'job': {
      const j = await new session.lib.BatchV1Api(session.config).readNamespacedJob({name, namespace})
      return {...base, template: j.spec!.template, annotations: j.metadata?.annotations ?? {}, resourceVersion: j.metadata?.resourceVersion}
    }
    case 'pod': {
      const p = await session.core.readNamespacedPod({name, namespace})
      return {...base, fromPod: true, template: {metadata: p.metadata, spec: p.spec}, annotations: p.metadata?.annotations ?? {}, resourceVersion: p.metadata?.resourceVersion}
    }
  }
}

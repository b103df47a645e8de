import type {AuthenticationV1Api, AuthorizationV1Api} from '@kubernetes/client-node'
import {describeApiError} from '../kube/errors.js'
import type {AccessAttributes, Reviewer, TokenReviewResult, UserInfo} from './auth.js'

/** The webhook modes through the API server: TokenReview and SubjectAccessReview (authentication/authorization.k8s.io/v1). */
export function apiReviewer(authentication: AuthenticationV1Api, authorization: AuthorizationV1Api): Reviewer {
  return {
    async tokenReview(token: string): Promise<TokenReviewResult> {
      try {
        const r = await authentication.createTokenReview({body: {apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: {token}}})
        const s = r.status
        if (!s?.authenticated || !s.user?.username) return {authenticated: false, error: s?.error}
        return {authenticated: true, user: {name: s.user.username, uid: s.user.uid, groups: s.user.groups ?? [], extra: s.user.extra}}
      } catch (error) {
        throw new Error(describeApiError(error), {cause: error})
      }
    },
    async subjectAccessReview(user: UserInfo, attrs: AccessAttributes): Promise<boolean> {
      try {
        const r = await authorization.createSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: user.name,
              uid: user.uid,
              groups: user.groups,
              extra: user.extra,
              resourceAttributes: {verb: attrs.verb, group: '', version: 'v1', resource: attrs.resource, subresource: attrs.subresource, name: attrs.name},
            },
          },
        })
        return r.status?.allowed === true && r.status.denied !== true
      } catch (error) {
        throw new Error(describeApiError(error), {cause: error})
      }
    },
  }
}

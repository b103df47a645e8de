// Unit tests run anywhere; e2e tests share one real control plane per run
// (test/e2e/global-setup.mjs) and run one file at a time.
/** Unit tests fail fast; e2e tests keep the common timeout for a real control plane. */
const DefaultUnitTestTimeoutMs = 10_000

const common = {
  extensionsToTreatAsEsm: ['.ts', '.tsx'],
  moduleNameMapper: {'^(\\.{1,2}/.*)\\.js$': '$1'},
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', {jsc: {parser: {syntax: 'typescript', tsx: true}, transform: {react: {runtime: 'automatic'}}, target: 'es2022'}}],
  },
  testEnvironment: 'node',
  // Jest's soft-deletion of globals between files trips over EventEmitters left by client libraries.
  testEnvironmentOptions: {globalsCleanup: 'off'},
  testTimeout: 120_000,
}

export default {
  projects: [
    // Unit tests fake everything slow: one that waits longer than this is waiting on something real.
    {...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts?(x)'], testTimeout: DefaultUnitTestTimeoutMs},
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      globalSetup: '<rootDir>/test/e2e/global-setup.mjs',
      globalTeardown: '<rootDir>/test/e2e/global-teardown.mjs',
    },
  ],
  testTimeout: 120_000,
}

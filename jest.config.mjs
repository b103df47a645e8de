// Unit tests run anywhere; e2e tests share one real control plane per run
// (test/e2e/global-setup.mjs). Files run in parallel (npm test: four workers),
// each with its own namespace, node names, state dirs and ports; the few that
// read or make state of the whole host take that state's host lock (the
// network, the cgroup trees, the default kubelet port) one at a time, and a
// file that would starve the others has the machine to itself
// (test/e2e/host-lock.ts). The files holding the network's lock are the
// blocks of one file (network-lock.test.ts), and the order of the run starts
// the machine's file, then that one (test/e2e/sequencer.mjs).
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
  // The files that wait on host locks first (test/e2e/sequencer.mjs), so no lane idles behind a lock at the end.
  testSequencer: '<rootDir>/test/e2e/sequencer.mjs',
}

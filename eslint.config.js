// Lint for the TypeScript and the scripts: typescript-eslint's recommended
// rules without type information, fast enough for every `npm test`.
// Formatting is prettier's (.prettierrc.json), checked by the same `npm run lint`.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/** The Node globals the .mjs scripts use (TypeScript files are checked by tsc instead). */
const nodeGlobals = Object.fromEntries(
  ['process', 'console', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'URL', 'performance', 'Buffer', 'AbortController', 'fetch'].map((name) => [name, 'readonly']),
)

export default tseslint.config(
  {ignores: ['dist/**', 'node_modules/**', 'coverage/**']},
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {files: ['**/*.mjs', '**/*.js'], languageOptions: {globals: nodeGlobals}},
  // A timer declared before the closure that clears it is assigned after.
  {rules: {'prefer-const': ['error', {ignoreReadBeforeAssign: true}]}},
  // Terminal output is asserted with its escape codes.
  {files: ['test/**'], rules: {'no-control-regex': 'off'}},
)

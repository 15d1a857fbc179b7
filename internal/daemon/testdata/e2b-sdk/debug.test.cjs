// The E2B SDKs' debug mode (E2B_DEBUG=true) against agentbox's debug listeners (localhost ports
// 3000, 49983, 49999): TestE2BSDKDebug runs it. In debug mode the SDK makes no control-plane call
// for Sandbox.create and sends no credential to the sandbox: agentbox serves its one debug sandbox
// to processes of root and of the owner of the daemon's key.
'use strict'
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Sandbox } = require('@e2b/code-interpreter')

test('debug mode: create, run code, a command, files; the debug sandbox is one and keeps its state', async () => {
  const sbx = await Sandbox.create()
  assert.equal(sbx.sandboxId, 'debug_sandbox_id')
  const ex = await sbx.runCode('kept = 6 * 7\nprint(kept)')
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback)
  assert.equal(ex.logs.stdout.join('').trim(), '42')
  const r = await sbx.commands.run('echo debug')
  assert.equal(r.stdout, 'debug\n')
  await sbx.files.write('/tmp/debug.txt', 'local')
  assert.equal(await sbx.files.read('/tmp/debug.txt'), 'local')
  assert.equal(await sbx.isRunning(), true)
  const again = await Sandbox.create()
  const ex2 = await again.runCode('print(kept)')
  assert.equal(ex2.logs.stdout.join('').trim(), '42')
})

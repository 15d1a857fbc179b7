// Units that need no daemon: parsers, the error mapping, what printing a Result shows.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { AgentboxError, ERROR_CLASSES, InternalError, NotFound, Result, parseDuration, parseMemory } from '../src/index.js';
import { fromResponse } from '../src/errors.js';

test('durations and sizes read as in the Python SDK', () => {
  assert.equal(parseDuration(30), 30);
  assert.equal(parseDuration('1.5s'), 1.5);
  assert.equal(parseDuration('500ms'), 0.5);
  assert.equal(parseDuration('1h30m'), 5400);
  assert.equal(parseDuration(undefined), undefined);
  assert.throws(() => parseDuration('soon'), /use seconds/);
  assert.throws(() => parseDuration(0), /positive/);
  assert.equal(parseMemory('512MB'), 512);
  assert.equal(parseMemory('2GB'), 2048);
  assert.equal(parseMemory('1.5G'), 1536);
  assert.equal(parseMemory(256), 256);
  assert.throws(() => parseMemory('big'), /MiB/);
});

test('each API code has its own class carrying code, message, hint, status and result', () => {
  const body = Buffer.from(JSON.stringify({
    error: { code: 'not_found', message: 'no session sb_1', hint: 'create one' },
    result: { stdout: 'partial', stderr: '', exit_code: 0 },
  }));
  const e = fromResponse(404, body, 'req-1', (w) => new Result(w));
  assert.ok(e instanceof NotFound && e instanceof AgentboxError && e instanceof Error);
  assert.equal(e.name, 'NotFound');
  assert.deepEqual([e.code, e.message, e.hint, e.status, e.requestId], ['not_found', 'no session sb_1', 'create one', 404, 'req-1']);
  assert.equal(e.result.stdout, 'partial');
  assert.equal(String(e), 'NotFound not_found: no session sb_1 (create one)');
  assert.equal(Object.keys(ERROR_CLASSES).length, 11);
  for (const [code, cls] of Object.entries(ERROR_CLASSES)) {
    assert.equal(fromResponse(400, Buffer.from(JSON.stringify({ error: { code, message: 'm', hint: '' } })), '').constructor, cls);
  }
});

test('an answer that is not the API\'s is still typed, by its status', () => {
  const e = fromResponse(502, Buffer.from('<html>Bad Gateway</html>'), '');
  assert.equal(e.code, 'runtime_unavailable');
  assert.match(e.message, /HTTP 502: <html>Bad Gateway/);
  assert.match(e.hint, /check the URL/);
  assert.ok(fromResponse(500, Buffer.from(''), '') instanceof InternalError);
});

test('printing a Result does not dump whole files', () => {
  const big = Buffer.alloc(100000, 0x61).toString('base64');
  const r = new Result({
    stdout: 'x'.repeat(5000), files: [{ path: '/home/user/big.bin', content: big, size: 100000 }],
    artifacts: [{ id: 'art_1', name: 'figure-1.png', mime: 'image/png', size: 1234, sha256: '00' }],
  });
  const s = inspect(r);
  assert.ok(s.length < 1500, s);
  assert.match(s, /big\.bin \(100000 bytes\)/);
  assert.match(s, /figure-1\.png \(image\/png, 1234 bytes/);
  assert.equal(r.files[0].content.length, 100000);
});

test('a session that moved to another node says so once: result.notice, box.notices and a warning', async () => {
  const { createServer } = await import('node:http');
  const { Sandbox } = await import('../src/index.js');
  const moved = { kind: 'session_moved', from_node: 'a', to_node: 'b', step: 'st_2_ab', reason: 'node a is gone' };
  const result = (extra) => ({ stdout: '', stderr: '', exit_code: 0, error: null, runtime: 'nano', routing: { tier: 'nano', reasons: [] },
    stdout_truncated: false, stderr_truncated: false, files: [], artifacts: [], outputs: [],
    timings: { queue_ms: 0, start_ms: 0, execute_ms: 1, total_ms: 1, pool: 'warm' }, ...extra });
  let runs = 0;
  const srv = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let out = '';
      let status = 204;
      if (req.method === 'POST' && req.url === '/v1/sessions') {
        status = 201;
        out = JSON.stringify({ id: 'sb_a-1', runtime: 'nano', limits: {}, created_at: '2026-01-01T00:00:00Z', last_used: '2026-01-01T00:00:00Z', runs: 0, idle_timeout: 600 });
      } else if (req.url === '/v1/sessions/sb_a-1/run') {
        runs++;
        status = 200;
        out = JSON.stringify(result(runs === 2 ? { notice: moved } : {}));
      }
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(out);
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    const box = new Sandbox({ url: `http://127.0.0.1:${srv.address().port}`, apiKey: 'k' });
    assert.equal((await box.run('x = 1')).notice, undefined);
    const r = await box.run('print(x)');
    assert.deepEqual(r.notice, moved);
    assert.deepEqual(box.notices, [moved]);
    assert.equal((await box.run('y = 2')).notice, undefined);
    assert.equal(box.notices.length, 1);
    await box.close();
    await new Promise((r) => setImmediate(r));
    assert.ok(warnings.some((w) => w.code === 'AGENTBOX_SESSION_MOVED' && /resumed from step st_2_ab/.test(w.message)), String(warnings));
  } finally {
    process.off('warning', onWarning);
    srv.close();
  }
});

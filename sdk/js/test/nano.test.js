// The SDK against a real daemon without the heavy tier: sessions, one-shot runs, routing,
// typed errors, keys and URLs found as a user's program finds them, oversized bodies.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client, Conflict, DaemonUnreachable, InvalidRequest, NotFound, Sandbox, TimeoutError, Unauthorized, run,
  EXPECT_CONTINUE_BYTES, CodeError,
} from '../src/index.js';
import { KEY, startDaemon } from './daemon.js';

const MAX_BODY = 2 << 20;
const started = await startDaemon('nano', {
  heavy: { enabled: 'off' },
  sessions: { max: 3 },
  max_body_bytes: MAX_BODY,
  nano: { workers: 2, warm: 1 },
});
const d = started.daemon;
const skip = started.skip ?? false;
let saved;

describe('against a nano daemon', { skip }, () => {
  before(() => {
    saved = { url: process.env.AGENTBOX_URL, key: process.env.AGENTBOX_API_KEY, dir: process.env.AGENTBOX_DATA_DIR };
    process.env.AGENTBOX_URL = d.url;
    process.env.AGENTBOX_API_KEY = KEY;
  });
  after(async () => {
    for (const [k, v] of [['AGENTBOX_URL', saved.url], ['AGENTBOX_API_KEY', saved.key], ['AGENTBOX_DATA_DIR', saved.dir]]) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await d?.stop();
  });

  test('a session keeps state between runs, and close ends it', async () => {
    const box = new Sandbox();
    assert.equal(box.sessionId, null);
    const first = await box.run('x = 21');
    assert.ok(first.ok);
    const res = await box.run('print(x * 2)');
    assert.equal(res.stdout, '42\n');
    assert.equal(res.runtime, 'nano');
    assert.equal(box.runtime, 'nano');
    assert.match(box.sessionId, /^sb_/);
    assert.deepEqual(box.routing, res.routing);
    const sid = box.sessionId;
    assert.ok((await box.client.listSessions()).some((s) => s.id === sid));
    await box.close();
    await box.close(); // idempotent
    await assert.rejects(box.client.getSession(sid), NotFound);
    await assert.rejects(box.run('1'), /closed/);
  });

  test('concurrent first runs share one session', async () => {
    const box = new Sandbox();
    try {
      const results = await Promise.all([box.run('a = 1'), box.run('b = 2'), box.run('c = 3')]);
      assert.ok(results.every((r) => r.ok));
      assert.equal((await box.run('print(a + b + c)')).stdout, '6\n');
      const mine = (await box.client.listSessions()).filter((s) => s.id === box.sessionId);
      assert.equal(mine.length, 1);
    } finally {
      await box.close();
    }
  });

  test('a one-shot run shares nothing and says where it ran and why', async () => {
    const res = await run('import json; print(json.dumps({"status": "ok"}))', { runtime: 'auto' });
    assert.equal(res.stdout, '{"status": "ok"}\n');
    assert.equal(res.routing.tier, 'nano');
    assert.ok(res.routing.reasons.length > 0, JSON.stringify(res.routing));
    const box = new Sandbox({ stateful: false });
    await box.run('y = 1');
    const r2 = await box.run('print(y)');
    assert.equal(r2.error.name, 'NameError');
    assert.equal(r2.exit_code, 1);
    assert.equal(r2.ok, false);
    assert.throws(() => r2.raiseForError(), (e) => e instanceof CodeError && e.errorName === 'NameError' && /Remote traceback/.test(e.message));
    assert.equal(box.sessionId, null);
  });

  test('route asks without running', async () => {
    // This daemon has no heavy tier: the answer says where the code would go and why.
    const r = await new Client().route({ code: 'import json' });
    assert.equal(r.tier, 'nano');
    assert.ok(r.reasons.length > 0, JSON.stringify(r));
  });

  test('input files land in the working directory and changed files come back', async () => {
    const res = await run('open("out.txt", "w").write(open("in.txt").read().upper())', { files: { 'in.txt': 'abc' } });
    assert.ok(res.ok, res.stderr);
    const out = res.files.find((f) => f.path.endsWith('/out.txt'));
    assert.ok(out, JSON.stringify(res.files.map((f) => f.path)));
    assert.equal(out.content.toString(), 'ABC');
  });

  test('a timeout is TimeoutError carrying the output so far', async () => {
    const box = new Sandbox({ stateful: false, timeout: '1s' });
    await assert.rejects(box.run('import time\nprint("started", flush=True)\nwhile True: time.sleep(0.05)'), (e) => {
      assert.ok(e instanceof TimeoutError, String(e));
      assert.equal(e.code, 'timeout');
      assert.equal(e.status, 408);
      assert.ok(e.message.length > 0);
      assert.ok(e.result, 'no result');
      assert.match(e.result.stdout, /started/);
      return true;
    });
  });

  test('bad input is InvalidRequest with a hint; config is checked at once', async () => {
    await assert.rejects(new Sandbox({ stateful: false }).run('1', { timeout: 100000 }), (e) => {
      assert.ok(e instanceof InvalidRequest, String(e));
      assert.equal(e.status, 400);
      assert.match(e.message, /timeout/);
      return true;
    });
    assert.throws(() => new Sandbox({ runtime: 'fast' }), /runtime "fast"/);
    assert.throws(() => new Sandbox({ memory: 'lots' }), /memory/);
  });

  test('a wrong key is Unauthorized; a missing session is NotFound with a hint', async () => {
    await assert.rejects(new Sandbox({ apiKey: 'wrong', stateful: false }).run('1'), (e) => e instanceof Unauthorized && e.status === 401);
    await assert.rejects(Sandbox.connect('sb_0000000000000000'), (e) => e instanceof NotFound && /create a new Sandbox/.test(e.hint));
  });

  test('the session cap is Conflict', async () => {
    const boxes = [new Sandbox(), new Sandbox(), new Sandbox(), new Sandbox()];
    try {
      for (const b of boxes.slice(0, 3)) await b.run('1');
      await assert.rejects(boxes[3].run('1'), (e) => e instanceof Conflict && e.status === 409);
    } finally {
      await Promise.all(boxes.map((b) => b.close()));
    }
  });

  test('detach hands a session over to connect', async () => {
    const a = new Sandbox();
    await a.run('secret = 7');
    const sid = a.detach();
    assert.ok(a.closed);
    const b = await Sandbox.connect(sid);
    try {
      assert.equal((await b.run('print(secret)')).stdout, '7\n');
    } finally {
      await b.close();
    }
  });

  test('the key comes from the data directory when AGENTBOX_API_KEY is unset', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentbox-js-key-'));
    writeFileSync(join(dir, 'api_key'), KEY + '\n', { mode: 0o600 });
    delete process.env.AGENTBOX_API_KEY;
    process.env.AGENTBOX_DATA_DIR = dir;
    try {
      const c = new Client();
      assert.equal(c.apiKey, KEY);
      assert.equal(c.url, d.url);
      assert.equal((await c.run({ code: 'print(1)' })).stdout, '1\n');
    } finally {
      process.env.AGENTBOX_API_KEY = KEY;
      delete process.env.AGENTBOX_DATA_DIR;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an oversized body is refused naming the limit, not a connection reset', async () => {
    const big = Buffer.alloc(MAX_BODY + EXPECT_CONTINUE_BYTES, 0x61);
    const box = new Sandbox({ stateful: false });
    await assert.rejects(box.run('print(1)', { files: { 'big.bin': big } }), (e) => {
      assert.ok(e instanceof InvalidRequest, String(e));
      assert.equal(e.status, 413);
      assert.match(e.message, new RegExp(`${MAX_BODY} bytes`));
      assert.match(e.hint, /max_body_bytes/);
      return true;
    });
    // The client still works afterwards.
    assert.equal((await box.run('print(2)')).stdout, '2\n');
  });

  test('a streamed run delivers output as the code prints it', async () => {
    // A line every 100 ms for 2 s, each with the time it was printed.
    const code = 'import time\nfor i in range(20):\n    print(i, time.time(), flush=True)\n    time.sleep(0.1)';
    const chunks = [];
    const box = new Sandbox({ runtime: 'nano' });
    try {
      const res = await box.run(code, {
        timeout: 30,
        onStdout: (text) => chunks.push({ text, at: Date.now() / 1000 }),
      });
      const ended = Date.now() / 1000;
      assert.equal(chunks.map((c) => c.text).join(''), res.stdout);
      assert.equal(res.stdout.split('\n').length, 21);
      // The first line came while the code was still running, not with the result...
      assert.ok(ended - chunks[0].at > 1, `first chunk ${ended - chunks[0].at}s before the end`);
      // ...and soon after it was printed (a generous bound: the machine is shared).
      const printed = Number(chunks[0].text.split(' ')[1]);
      assert.ok(chunks[0].at - printed < 1, `first chunk ${chunks[0].at - printed}s after its print`);
    } finally {
      await box.close();
    }
  });

  test('a streamed run that times out rejects with TimeoutError and its output so far', async () => {
    const seen = [];
    const box = new Sandbox({ stateful: false, runtime: 'nano' });
    await assert.rejects(box.run('import time\nprint("started", flush=True)\nwhile True: time.sleep(0.05)', {
      timeout: 1, onStdout: (t) => seen.push(t),
    }), (e) => e instanceof TimeoutError && e.status === 408 && /started/.test(e.result.stdout));
    assert.equal(seen.join(''), 'started\n');
    // A refusal before the run starts is the usual typed error, streamed or not.
    await assert.rejects(box.run('1', { timeout: 100000, onStdout: () => {} }), InvalidRequest);
  });

  test('time travel: steps, rewind, fork, inspect, diff, pause and resume', async () => {
    const box = new Sandbox({ runtime: 'nano' });
    try {
      await box.run('x = 1');
      const s2 = (await box.run('x = 2')).step;
      assert.match(s2, /^st_/);
      await box.run("x = 3\ndel_me = 'later'");
      let steps;
      for (const deadline = Date.now() + 30000; ;) {
        steps = await box.steps();
        if (steps.every((s) => s.snapshot.state === 'durable')) break;
        assert.ok(Date.now() < deadline, JSON.stringify(steps.map((s) => s.snapshot)));
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.deepEqual(steps.map((s) => s.seq), [1, 2, 3]);
      assert.equal(steps[1].id, s2);
      assert.equal(steps[1].parent, steps[0].id);
      assert.equal((await box.rewind(s2)).head, s2);
      assert.equal((await box.run('print(x)')).stdout, '2\n');
      const other = await box.fork(steps[2]);
      try {
        assert.notEqual(other.sessionId, box.sessionId);
        assert.equal((await other.run('print(x, del_me)')).stdout, '3 later\n');
        assert.equal((await box.run('print(x)')).stdout, '2\n');
      } finally {
        await other.close();
      }
      const vars = Object.fromEntries((await box.inspect(steps[2])).variables.map((v) => [v.name, v]));
      assert.equal(vars.x.repr, '3');
      assert.equal(vars.del_me.type, 'str');
      const diff = await box.diff(steps[2]);
      assert.equal(diff.base, s2);
      assert.deepEqual(diff.added.map((v) => v.name), ['del_me']);
      assert.equal((await box.pause()).state, 'paused');
      assert.equal((await box.resume()).state, 'live');
      assert.equal((await box.run('print(x)')).stdout, '2\n');
      await assert.rejects(box.rewind('st_nope'), NotFound);
    } finally {
      await box.close();
    }
  });

  test('close with keep keeps the state and steps to go on from', async () => {
    const box = new Sandbox({ runtime: 'nano' });
    await box.run('kept = 41');
    const sid = box.sessionId;
    for (const deadline = Date.now() + 30000; ;) {
      if ((await box.steps()).every((s) => s.snapshot.state === 'durable')) break;
      assert.ok(Date.now() < deadline);
      await new Promise((r) => setTimeout(r, 20));
    }
    const kept = await box.close({ keep: true });
    assert.equal(kept.id, sid);
    assert.equal(kept.state, 'paused');
    assert.ok(kept.kept_until);
    const again = await Sandbox.connect(sid);
    try {
      assert.equal((await again.run('print(kept + 1)')).stdout, '42\n');
    } finally {
      await again.close();
    }
    await assert.rejects(box.client.closeSession(sid), NotFound);
  });

  test('no daemon at the URL is DaemonUnreachable', async () => {
    const c = new Client({ url: 'http://127.0.0.1:9', apiKey: 'k', timeout: 5 });
    await assert.rejects(c.health(), (e) => e instanceof DaemonUnreachable && e.code === null && /agentbox serve/.test(e.hint));
  });
});

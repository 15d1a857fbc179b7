// The SDK against a real daemon with the heavy tier (gVisor): session files, figures as
// artifacts, an auto session moving to heavy, an oversized upload refused with the limit named.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, InvalidRequest, NotFound, Sandbox } from '../src/index.js';
import { KEY, missing, startDaemon } from './daemon.js';

const MAX_BODY = 2 << 20;
const started = await startDaemon('heavy', { heavy: { warm: 1 }, sessions: { max: 4 }, max_body_bytes: MAX_BODY });
const d = started.daemon;
let skip = started.skip ?? false;
if (!skip && !(await d.runtimeOk('heavy'))) {
  skip = missing('the daemon has no heavy tier here (needs root, runsc and the image from `agentbox setup`)');
}
const client = d ? new Client({ url: d.url, apiKey: KEY }) : null;

const CHART = `import matplotlib.pyplot as plt
xs = list(range(10))
plt.plot(xs, [x * x for x in xs])
plt.title("squares")
plt.show()
`;

describe('against a heavy daemon', { skip }, () => {
  after(async () => {
    client?.close();
    await d?.stop();
  });

  test('files: write, read, list, remove; relative paths land in /home/user', async () => {
    const box = new Sandbox({ runtime: 'heavy', client });
    try {
      await box.files.write('data/in.csv', 'a,b\n1,2\n');
      await box.files.write('/tmp/raw.bin', Buffer.from([0, 1, 2, 255]));
      assert.equal(await box.files.readText('data/in.csv'), 'a,b\n1,2\n');
      assert.deepEqual([...(await box.files.read('/tmp/raw.bin'))], [0, 1, 2, 255]);
      const res = await box.run('print(open("data/in.csv").read().splitlines()[1])');
      assert.equal(res.stdout, '1,2\n');
      assert.equal(box.runtime, 'heavy');
      // Listed as written: relative by default and under a relative path, absolute under an absolute one.
      const list = await box.files.list();
      assert.ok(list.some((f) => f.path === 'data/in.csv' && f.size === 8 && !f.dir), JSON.stringify(list));
      assert.deepEqual((await box.files.list('data')).map((f) => f.path), ['data/in.csv']);
      assert.deepEqual((await box.files.list('/home/user/data')).map((f) => f.path), ['/home/user/data/in.csv']);
      await box.files.remove('data');
      await assert.rejects(box.files.read('data/in.csv'), NotFound);
    } finally {
      await box.close();
    }
  });

  test('a figure is an artifact to download, checked against its sha256', async () => {
    const streamed = [];
    const res = await new Sandbox({ stateful: false, client }).run(CHART, { onArtifact: (a) => streamed.push(a) });
    assert.deepEqual(streamed.map((a) => a.id), res.artifacts.map((a) => a.id));
    assert.ok(res.ok, res.stderr);
    assert.equal(res.runtime, 'heavy');
    assert.ok(res.routing.reasons.some((r) => r.includes('matplotlib')), JSON.stringify(res.routing));
    assert.equal(res.artifacts.length, 1);
    const a = res.artifacts[0];
    assert.equal(a.mime, 'image/png');
    const png = await a.read();
    assert.equal(png.length, a.size);
    assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47]); // "PNG"
    const dir = mkdtempSync(join(tmpdir(), 'agentbox-js-art-'));
    try {
      const p = await a.save(dir);
      assert.equal(p, join(dir, a.name));
      assert.deepEqual(readFileSync(p), png);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a streamed heavy run calls back with output chunks and rich values as they come', async () => {
    const out = [];
    const values = [];
    const box = new Sandbox({ runtime: 'heavy', client });
    try {
      const res = await box.run('import sys\nprint("one", flush=True)\nprint("two", file=sys.stderr, flush=True)\n21 * 2', {
        onStdout: (t) => out.push(['stdout', t]), onStderr: (t) => out.push(['stderr', t]), onResult: (o) => values.push(o),
      });
      assert.equal(out.filter(([k]) => k === 'stdout').map(([, t]) => t).join(''), res.stdout);
      assert.equal(out.filter(([k]) => k === 'stderr').map(([, t]) => t).join(''), 'two\n');
      assert.deepEqual(values.map((o) => o.text), ['42']);
      assert.deepEqual(res.outputs.map((o) => o.text), ['42']);
    } finally {
      await box.close();
    }
  });

  test('an auto session moves to heavy with its state and says why', async () => {
    const box = new Sandbox({ client });
    try {
      await box.run('x = 4');
      assert.equal(box.runtime, 'nano');
      const res = await box.run('import pandas as pd\nprint(pd.Series([x, 2]).sum())');
      assert.equal(res.stdout, '6\n');
      assert.equal(box.runtime, 'heavy');
      assert.ok(res.routing.reasons.some((r) => r.includes('pandas')), JSON.stringify(res.routing));
    } finally {
      await box.close();
    }
  });

  test('commands: a shell line, argv, streamed output, a background command read while it runs and killed', async () => {
    const box = new Sandbox({ client }); // commands start a heavy session, as files do
    try {
      await box.files.write('data/a.txt', 'hello');
      const ls = await box.commands.run('ls data && echo err >&2');
      assert.equal(box.runtime, 'heavy');
      assert.equal(ls.status, 'exited');
      assert.equal(ls.exit_code, 0);
      assert.equal(ls.stdout, 'a.txt\n');
      assert.equal(ls.stderr, 'err\n');
      const cat = await box.commands.run(['cat', 'a.txt'], { cwd: 'data' });
      assert.equal(cat.stdout, 'hello');
      const fail = await box.commands.run('exit 3');
      assert.equal(fail.exit_code, 3);
      const chunks = [];
      const streamed = await box.commands.run('for i in 1 2 3; do echo $i; sleep 0.1; done', { onStdout: (t) => chunks.push(t) });
      assert.equal(chunks.join(''), '1\n2\n3\n');
      assert.equal(streamed.stdout, '1\n2\n3\n');
      const bg = await box.commands.run('echo started; sleep 60', { background: true });
      assert.equal(bg.status, 'running');
      let seen = bg;
      for (let i = 0; i < 100 && !seen.stdout.includes('started'); i++) {
        await new Promise((r) => setTimeout(r, 100));
        seen = await box.commands.get(bg.id);
      }
      assert.equal(seen.stdout, 'started\n');
      assert.equal(seen.status, 'running');
      const killed = await box.commands.kill(bg.id);
      assert.equal(killed.status, 'killed');
      assert.ok((await box.commands.list()).some((c) => c.id === bg.id));
    } finally {
      await box.close();
    }
  });

  test('a nano session refuses commands with a typed error that says why', async () => {
    const box = new Sandbox({ runtime: 'nano', client });
    try {
      await box.run('x = 1');
      await assert.rejects(box.commands.run('ls'), (e) => e instanceof InvalidRequest && /heavy/.test(e.message + e.hint));
    } finally {
      await box.close();
    }
  });

  test('a volume written in one session is read in a later one and through the files API', async () => {
    const name = `js-vol-${process.pid}`;
    const v = await client.createVolume(name, 4 << 20);
    assert.equal(v.name, name);
    assert.equal(v.quota_bytes, 4 << 20);
    try {
      const a = new Sandbox({ client, volumes: { [name]: '/mnt/data' } });
      try {
        await a.run("open('/mnt/data/note.txt', 'w').write('kept')");
        assert.equal(a.runtime, 'heavy');
        assert.equal((await client.getVolume(name)).mounted_rw, 1);
      } finally {
        await a.close();
      }
      assert.equal((await client.readVolumeFile(name, 'note.txt')).toString(), 'kept');
      await client.writeVolumeFile(name, 'from-api/b.txt', 'by the API');
      const b = new Sandbox({ client, volumes: { [name]: '/mnt/data:ro' } });
      try {
        const res = await b.run("print(open('/mnt/data/note.txt').read(), open('/mnt/data/from-api/b.txt').read())");
        assert.equal(res.stdout, 'kept by the API\n');
      } finally {
        await b.close();
      }
      assert.ok((await client.listVolumes()).some((x) => x.name === name));
    } finally {
      await client.deleteVolume(name);
    }
    await assert.rejects(client.getVolume(name), NotFound);
  });

  test('an oversized upload is refused naming the limit, not a connection reset', async () => {
    const box = new Sandbox({ runtime: 'heavy', client });
    try {
      await assert.rejects(box.files.write('big.bin', Buffer.alloc(MAX_BODY + 1)), (e) => {
        assert.ok(e instanceof InvalidRequest, String(e));
        assert.equal(e.status, 413);
        assert.match(e.message, new RegExp(`${MAX_BODY} bytes`));
        return true;
      });
      // The next upload on the same client goes through.
      await box.files.write('small.bin', 'ok');
      assert.equal(await box.files.readText('small.bin'), 'ok');
    } finally {
      await box.close();
    }
  });
});

// Compiled, never run: scripts/js-sdk-test.sh checks with tsc (--strict) that index.d.ts
// compiles and types a program that uses the SDK the way its README does.

import {
  AgentboxError, Artifact, Client, CodeError, ERROR_CLASSES, InvalidRequest, NotFound, Notice, Output, Result, Routing,
  Sandbox, Step, StepDiff, StepInspection, StreamEvent, TimeoutError, run,
} from 'agentbox';

export async function useTheSDK(): Promise<number> {
  const box = new Sandbox({ runtime: 'auto', timeout: '30s', memory: '512MB', env: { A: '1' } });
  const r: Result = await box.run('print(1)', {
    timeout: 5,
    files: { 'in.txt': 'abc', 'raw.bin': new Uint8Array([0, 1]) },
    onStdout: (t: string) => process.stdout.write(t),
    onStderr: (t: string) => process.stderr.write(t),
    onResult: (o: Output) => console.log(o.text, o.html, o.json),
    onArtifact: (a: Artifact) => console.log(a.id, a.mime, a.size),
  });
  const code: number = r.exit_code;
  const ok: boolean = r.ok;
  const why: Routing = r.routing;
  const reasons: string[] = why.reasons;
  const seconds: number = r.duration + r.timings.total_ms;
  if (r.error) console.log(r.error.name, r.error.value, r.error.traceback);
  const moved: Notice | undefined = r.notice;
  if (moved) console.log(moved.kind, moved.from_node, moved.to_node, moved.step, moved.reason);
  const notices: Notice[] = box.notices;
  for (const f of r.files) await f.save(f.path.split('/').pop() ?? 'out');
  for (const a of r.artifacts) {
    const png: Buffer = await a.read();
    await a.save(`${a.name}.${png.length}`);
  }
  await box.files.write('data/in.csv', 'a,b\n');
  const text: string = await box.files.readText('data/in.csv');
  const listed: string[] = (await box.files.list('data')).map((f) => f.path);
  const ls = await box.commands.run('ls -la', { cwd: 'data', timeout: '10s', onStdout: (t: string) => console.log(t) });
  const bg = await box.commands.run(['sleep', '60'], { background: true });
  const status: string = (await box.commands.get(bg.id)).status + (await box.commands.kill(bg.id)).status + ls.stdout;
  console.log(status, (await box.commands.list()).length, notices.length);
  const steps: Step[] = await box.steps();
  await box.rewind(steps[0]);
  const forked: Sandbox = await box.fork(steps[0].id);
  const seen: StepInspection = await forked.inspect();
  const changed: StepDiff = await box.diff(steps[0], steps[0].parent);
  console.log(seen.variables.map((v) => v.name + v.type + (v.shape ?? []).length), changed.files_added.length,
    (await box.pause()).state, (await box.resume()).state, steps[0].snapshot.durable_ms);
  const sid: string | null = box.detach();
  if (sid) {
    const again = await Sandbox.connect(sid);
    await again.close();
  }
  try {
    await run('while True: pass', { timeout: 1, runtime: 'nano' });
  } catch (e) {
    if (e instanceof TimeoutError) console.log(e.code, e.hint, e.status, e.result?.stdout, e.requestId);
    if (e instanceof InvalidRequest || e instanceof NotFound) console.log(e.message);
    if (e instanceof AgentboxError) console.log(ERROR_CLASSES[e.code ?? 'internal'] === e.constructor);
    if (e instanceof CodeError) console.log(e.errorName, e.traceback, e.stdout);
  }
  const c = new Client({ url: 'http://127.0.0.1:8420', apiKey: 'k', timeout: 10, maxConnections: 4 });
  const events: StreamEvent[] = [];
  const res = await c.runStream({ code: 'print(1)', runtime: 'nano' }, (ev) => { events.push(ev); });
  const route = await c.route({ code: 'import pandas' });
  const sessions = await c.listSessions();
  const vol = await c.createVolume('data', 8 << 20);
  await c.writeVolumeFile(vol.name, 'a/b.txt', 'x');
  const kept: Buffer = await c.readVolumeFile(vol.name, 'a/b.txt');
  console.log(kept.length, (await c.listVolumes()).map((v) => v.quota_bytes + v.mounted_rw + v.mounted_ro));
  new Sandbox({ volumes: { data: '/mnt/data:ro' } });
  c.close();
  return code + (ok ? 1 : 0) + reasons.length + seconds + text.length + listed.length + res.stdout.length +
    route.reasons.length + sessions.length + events.length;
}

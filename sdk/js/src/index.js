// agentbox: run untrusted Python written by AI agents on an agentbox daemon, from Node 18+.
// No runtime dependencies. The types are in ../index.d.ts.
//
//   import { Sandbox } from 'agentbox';
//   const box = new Sandbox();
//   console.log((await box.run('print(6 * 7)')).stdout);
//   await box.close();
//
// The daemon is found at AGENTBOX_URL (default http://127.0.0.1:8420) with the key
// AGENTBOX_API_KEY, else the api_key file that `agentbox serve` keeps in its data directory,
// else that of the system service (/var/lib/agentbox/api_key).

export {
  Client, ROUTES, DEFAULT_URL, VERSION, apiKeyFromEnv, urlFromEnv, defaultDataDir, EXPECT_CONTINUE_BYTES,
} from './client.js';
export { Sandbox, Files, Commands, run } from './sandbox.js';
export { Result, Artifact, OutputFile } from './models.js';
export { parseDuration, parseMemory } from './config.js';
export {
  AgentboxError, InvalidRequest, Unauthorized, PolicyViolation, Forbidden, NotFound, TimeoutError, Conflict,
  MemoryLimitExceeded, OutputLimitExceeded, InternalError, RuntimeUnavailable, DaemonUnreachable, CodeError,
  ERROR_CLASSES,
} from './errors.js';

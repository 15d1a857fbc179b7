// Parsers of human durations and sizes ("30s", "512MB"), as the Python SDK's
// parse_duration and parse_memory, so a config means the same in both SDKs.

const durationPart = /(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)/y;
const sizeRe = /^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?\s*$/i;
const sizeMiB = { b: 1 / (1 << 20), k: 1 / 1024, m: 1, g: 1024, t: 1 << 20 };

/**
 * Seconds from a number of seconds or a Go-style duration ("30s", "1.5s", "500ms", "5m", "1h30m").
 * undefined/null stay undefined (the server's default); zero or negative durations are refused.
 */
export function parseDuration(v) {
  if (v === undefined || v === null) return undefined;
  let secs;
  if (typeof v === 'number') {
    secs = v;
  } else if (typeof v === 'string') {
    const s = v.replace(/\s+/g, '');
    if (s !== '' && !Number.isNaN(Number(s))) {
      secs = Number(s);
    } else {
      secs = 0;
      let pos = 0;
      durationPart.lastIndex = 0;
      for (let m; (m = durationPart.exec(s)) !== null; pos = durationPart.lastIndex) {
        const n = Number(m[1]);
        secs += { ms: n / 1000, s: n, m: n * 60, h: n * 3600 }[m[2]];
      }
      if (pos !== s.length || !s) {
        throw new TypeError(`duration ${JSON.stringify(v)}: use seconds (30, 1.5) or units ms, s, m, h ("30s", "5m")`);
      }
    }
  } else {
    throw new TypeError(`a duration is a number of seconds or a string like "30s", not ${typeof v}`);
  }
  if (!Number.isFinite(secs) || secs <= 0) throw new RangeError(`duration ${JSON.stringify(v)} must be positive`);
  return secs;
}

/**
 * MiB from a number of MiB or a size ("512MB", "512MiB", "2GB", "1.5G"): the API counts memory
 * in MiB, so "MB" and "MiB" mean the same here. Rounded up to whole MiB.
 */
export function parseMemory(v) {
  if (v === undefined || v === null) return undefined;
  let mib;
  if (typeof v === 'number') {
    mib = v;
  } else if (typeof v === 'string') {
    const m = sizeRe.exec(v);
    if (!m) throw new TypeError(`memory ${JSON.stringify(v)}: use MiB (512) or a size like "512MB", "2GB"`);
    mib = Number(m[1]) * sizeMiB[(m[2] || 'm').toLowerCase()[0]];
  } else {
    throw new TypeError(`a memory size is a number of MiB or a string like "512MB", not ${typeof v}`);
  }
  if (!Number.isFinite(mib) || mib <= 0) throw new RangeError(`memory ${JSON.stringify(v)} must be positive`);
  return Math.ceil(mib);
}

export const RUNTIMES = Object.freeze(['auto', 'nano', 'heavy']);

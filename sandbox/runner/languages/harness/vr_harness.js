// One node serving a job's stdio tests (sandbox/runner/languages/harness.py): per test, the
// program as a CommonJS main module in a fresh vm context (its globals and builtins' prototypes
// start over), with process.stdin/stdout/stderr, console and require('fs')'s reads of fd 0 of
// its own. A test ends where a fresh node would exit: when the event loop has nothing left
// ('beforeExit'); then one line on stderr with the test's secret (sent with its input) says
// "ended as a clean exit 0" and the next test runs. Anything else a fresh node would end with
// (an uncaught exception, process.exit, an exit code set, a listener on process) ends this node
// that way, and the next test gets a fresh one. So does a test that left state in this realm's
// shared objects (see watch() below): a later test never sees what an earlier one changed.
//
// The vm is not a boundary, so this file keeps the program away from what would let it reach
// the secret (run with --disallow-code-generation-from-strings: `this.constructor.constructor`
// compiles nothing here; the program's process is a plain object, not ours; the builtins that
// reach this realm's internals or memory (vm, module, inspector, v8, processes, workers) and
// fs on /proc or /dev/fd ask the supervisor for a process per test instead; every function
// this file calls was taken before any program ran). Even so, assume a program can escape:
// the sandbox isolates, the supervisor judges, and a forged line means no more than
// process.exit(0) at that point would.
'use strict';
const fs = require('fs');
const vm = require('vm');
const path = require('path');
const { PassThrough, Writable } = require('stream');
const { Console } = require('console');
const Module = require('module');

const hostRequire = require;
const { apply, construct } = Reflect;
const { defineProperty, create } = Object;
const hasOwn = Object.prototype.hasOwnProperty;
const charCodeAt = String.prototype.charCodeAt;
const { readSync, writeSync, readFileSync, readFile } = fs;
const bufferAlloc = Buffer.alloc;
const bufferFrom = Buffer.from;
const fromCharCode = String.fromCharCode;
const startsWith = String.prototype.startsWith;
const toNumber = Number;
const exit = process.exit.bind(process);
const immediate = setImmediate;
const builtins = new Set(Module.builtinModules);
const resolvePath = path.resolve;
const realpath = fs.realpathSync;
const { getOwnPropertyDescriptor, getPrototypeOf, isExtensible, is: sameValue } = Object;
const { ownKeys } = Reflect;
const setHas = Set.prototype.has;
const setAdd = Set.prototype.add;
const readdirSync = fs.readdirSync;
const readlinkSync = fs.readlinkSync;
const umask = process.umask.bind(process);
const allocUnsafe = Buffer.allocUnsafe;
const { isMap, isSet } = require('util').types;
const mapForEach = Map.prototype.forEach;
const setForEach = Set.prototype.forEach;

const [mainPath] = process.argv.slice(2);
const filename = resolvePath(mainPath);
let source = readFileSync(filename, 'utf8');
if (source.startsWith('#!')) source = '//' + source.slice(2);  // node ignores a shebang line
const script = new vm.Script(Module.wrap(source), { filename });
const STDIN_PATHS = new Set([0, '0', '/dev/stdin', '/proc/self/fd/0', '/dev/fd/0']);
// builtins that reach this realm, its memory or other processes: a process per test instead
const APART = new Set(['vm', 'module', 'inspector', 'v8', 'repl', 'worker_threads', 'child_process', 'cluster',
  'trace_events', 'wasi', 'async_hooks', 'diagnostics_channel', 'inspector/promises']);
const GLOBALS = ['Buffer', 'setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval',
  'clearImmediate', 'queueMicrotask', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'structuredClone',
  'atob', 'btoa', 'AbortController', 'AbortSignal', 'Event', 'EventTarget', 'performance', 'fetch',
  'BroadcastChannel', 'MessageChannel', 'MessagePort', 'Blob'];
const PROCESS_VALUES = ['pid', 'ppid', 'platform', 'arch', 'version', 'versions', 'release', 'execPath', 'argv0',
  'title', 'config', 'features', 'execArgv'];
const PROCESS_CALLS = ['hrtime', 'memoryUsage', 'cpuUsage', 'resourceUsage', 'uptime', 'nextTick', 'cwd', 'umask',
  'emitWarning', 'getuid', 'getgid', 'geteuid', 'getegid', 'kill'];
let state = null;

// State a test leaves for the next one. Every object of this realm a program can reach (the
// language's intrinsics, through any object a builtin returns; the builtins it required; the
// globals it used; the stream and console classes of its stdio) is recorded, with everything
// reachable from it by own properties and prototypes, before the program gets it: each
// object's prototype, extensibility and own properties (value or accessor pair, writability).
// After each test the records are compared; a difference ends the process as a fresh node
// would have ended (exit 0 after the answer), so the next test gets a fresh one. Settings a
// builtin keeps in its closures are read by probes. Once a program ran, only defineProperty adds to the
// records (no setter a program put on this realm's prototypes runs), and only functions taken above run.
const watched = { objs: [], recs: [], items: [], seen: new Set(), probes: [], values: [] };

let programRan = false;
const push = Array.prototype.push;

function put(arr, v) {  // once a program ran, no setter it put on Array.prototype may run here
  if (programRan) defineProperty(arr, arr.length, { value: v, writable: true, enumerable: true, configurable: true });
  else apply(push, arr, [v]);
}

function isObject(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function');
}

function items(o) {  // a Map's or Set's entries (its state is in no property), else null
  if (!isMap(o) && !isSet(o)) return null;
  const out = [];
  apply(isMap(o) ? mapForEach : setForEach, o, [(v, k) => { put(out, k); put(out, v); }]);
  return out;
}

function watch(root) {
  const stack = [];
  put(stack, root);
  while (stack.length) {
    const o = stack[stack.length - 1];
    stack.length -= 1;
    if (!isObject(o) || apply(setHas, watched.seen, [o])) continue;
    apply(setAdd, watched.seen, [o]);
    const proto = getPrototypeOf(o);
    const rec = [];
    put(rec, proto);
    put(rec, isExtensible(o));
    if (proto) put(stack, proto);
    const keys = ownKeys(o);
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j];
      const d = getOwnPropertyDescriptor(o, k);
      if (apply(hasOwn, d, ['value'])) {
        put(rec, k); put(rec, d.value); put(rec, d.writable);
        if (isObject(d.value)) put(stack, d.value);
      } else {
        put(rec, k); put(rec, d.get); put(rec, d.set);
        if (d.get) put(stack, d.get);
        if (d.set) put(stack, d.set);
      }
    }
    const held = items(o);
    for (let j = 0; held && j < held.length; j++) if (isObject(held[j])) put(stack, held[j]);
    put(watched.objs, o);
    put(watched.recs, rec);
    put(watched.items, held);
  }
}

function probe(fn) {  // a setting a builtin keeps in a closure, read by `fn` (a primitive)
  put(watched.probes, fn);
  put(watched.values, fn());
}

function unchanged() {
  const { objs, recs, probes, values } = watched;
  const held = watched.items;
  for (let i = 0; i < objs.length; i++) {
    const o = objs[i];
    const rec = recs[i];
    if (getPrototypeOf(o) !== rec[0] || isExtensible(o) !== rec[1]) return false;
    const keys = ownKeys(o);
    if (keys.length * 3 + 2 !== rec.length) return false;
    for (let j = 0, r = 2; j < keys.length; j++, r += 3) {
      const k = keys[j];
      if (k !== rec[r]) return false;
      const d = getOwnPropertyDescriptor(o, k);
      if (apply(hasOwn, d, ['value'])) {
        if (!sameValue(d.value, rec[r + 1]) || d.writable !== rec[r + 2]) return false;
      } else if (d.get !== rec[r + 1] || d.set !== rec[r + 2]) {
        return false;
      }
    }
    if (held[i]) {
      const now = items(o);
      if (now.length !== held[i].length) return false;
      for (let j = 0; j < now.length; j++) if (!sameValue(now[j], held[i][j])) return false;
    }
  }
  for (let i = 0; i < probes.length; i++) if (!sameValue(probes[i](), values[i])) return false;
  return true;
}

const extras = {  // what a builtin keeps that its exports' properties do not show
  util: (m) => {  // the getter gives a copy of the options inspect keeps (its setter changes them)
    const get = getOwnPropertyDescriptor(m.inspect, 'defaultOptions').get;
    probe(() => {
      const o = apply(get, m.inspect, []);
      const keys = ownKeys(o);
      let said = '';
      for (let i = 0; i < keys.length; i++) said += `${String(keys[i])}=${String(o[keys[i]])};`;
      return said;
    });
  },
  events: (m) => { probe(() => m.defaultMaxListeners); probe(() => m.captureRejections); },
  buffer: (m) => probe(() => m.INSPECT_MAX_BYTES),
  stream: (m) => callProbe(m, 'getDefaultHighWaterMark', [false]),
  net: (m) => { callProbe(m, 'getDefaultAutoSelectFamily', []); callProbe(m, 'getDefaultAutoSelectFamilyAttemptTimeout', []); },
  dns: (m) => callProbe(m, 'getDefaultResultOrder', []),
  perf_hooks: (m) => { const p = m.performance; const entries = p.getEntries; probe(() => apply(entries, p, []).length); },
};
const watchedModules = new Set();

function callProbe(m, name, args) {  // the function as it was when the module was first given out
  const fn = m[name];
  if (typeof fn === 'function') probe(() => apply(fn, m, args));
}

function watchModule(name) {
  if (apply(setHas, watchedModules, [name])) return;
  apply(setAdd, watchedModules, [name]);
  const m = hostRequire(name);
  watch(m);
  if (apply(hasOwn, extras, [name])) extras[name](m);
}

function watchGlobal(name, value) {
  if (name === 'performance') watchModule('perf_hooks');
  watch(value);
}

const DEVICES = new Set(['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom']);  // no state in them

function openFiles() {  // this process's descriptors open on a path (not pipes, sockets, /proc, devices)
  const found = create(null);
  let fds;
  try { fds = readdirSync('/proc/self/fd'); } catch { return found; }
  for (let i = 0; i < fds.length; i++) {
    const fd = fds[i];
    let target;
    try { target = readlinkSync('/proc/self/fd/' + fd); } catch { continue; }
    if (apply(startsWith, target, ['/']) && !apply(startsWith, target, ['/proc/']) && !apply(setHas, DEVICES, [target])) {
      found[fd] = target;
    }
  }
  return found;
}

// A timer or immediate the program unrefs may still be pending when the loop is otherwise empty
// (where a fresh node exits): in a shared node it would run in a later test. So unref, on the
// prototypes every timer shares (before they are recorded above), marks the test's state left
// behind; a ref'd one keeps the test running.
for (const [made, clear] of [[setTimeout(() => {}, 0), clearTimeout], [setImmediate(() => {}), clearImmediate]]) {
  clear(made);
  const proto = getPrototypeOf(made);
  const d = getOwnPropertyDescriptor(proto, 'unref');
  const unref = d.value;
  const patched = { unref() { if (state) state.dirty = true; return apply(unref, this, []); } }.unref;
  defineProperty(proto, 'unref', { value: patched, writable: d.writable, enumerable: d.enumerable, configurable: d.configurable });
}

const intrinsics = [Object, Function, Array, Number, Boolean, String, Symbol, BigInt, Date, Promise, RegExp, Error,
  AggregateError, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, JSON, Math, Intl, Reflect,
  ArrayBuffer, SharedArrayBuffer, DataView, Atomics, Uint8Array, Map, Set, WeakMap, WeakSet, WeakRef,
  FinalizationRegistry, Proxy, WebAssembly, [][Symbol.iterator](), new Map().entries(), new Set().values(),
  ''[Symbol.iterator](), /a/[Symbol.matchAll](''), function* gen() {}, async function af() {},
  async function* ag() {}, parseInt, parseFloat, isNaN, isFinite, decodeURI, decodeURIComponent, encodeURI,
  encodeURIComponent, escape, unescape];
for (const k of ['Int8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
  'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array']) intrinsics.push(globalThis[k]);
for (const v of intrinsics) watch(v);
for (const name of ['stream', 'console', 'events', 'buffer', 'string_decoder']) watchModule(name);
for (const k of PROCESS_VALUES) watch(process[k]);
const umask0 = umask(0o022);
umask(umask0);
const files0 = openFiles();

function leftState() {  // whether this test left anything a later test could see
  if (umask(umask0) !== umask0) return true;  // put back, and said
  const files = openFiles();  // a file a test opened and left open (its number may be one closed since)
  const fds = ownKeys(files);
  for (let i = 0; i < fds.length; i++) if (files0[fds[i]] !== files[fds[i]]) return true;
  return !unchanged();
}

function freshBufferPool() {  // Buffer.allocUnsafe's shared pool: the next test's is a new one
  const pool = allocUnsafe(1).buffer;
  const half = (Buffer.poolSize >>> 1) - 1;
  for (let i = 0; i < 4 && allocUnsafe(half).buffer === pool; i++);
}

function readHeader() {  // the next test's "<secret> <bytes>\n" from fd 0, byte by byte, blocking
  const b = bufferAlloc(1);
  let secret = '';
  let size = -1;
  for (;;) {
    let n;
    try { n = readSync(0, b, 0, 1, null); } catch (e) { if (e.code === 'EAGAIN') continue; throw e; }
    if (n === 0) return null;
    const c = b[0];
    if (c === 10) return { secret, size };
    if (c === 32) size = 0;
    else if (size >= 0) size = size * 10 + (c - 48);
    else secret += fromCharCode(c);
  }
}

function readFully(n) {
  const buf = bufferAlloc(n);
  for (let off = 0; off < n;) {
    let k;
    try { k = readSync(0, buf, off, n - off, null); } catch (e) { if (e.code === 'EAGAIN') continue; throw e; }
    if (k === 0) throw new Error('stdin ended inside a test\'s input');
    off += k;
  }
  return buf;
}

function writeAll(fd, buf, n = buf.byteLength) {
  for (let off = 0; off < n;) {
    try { off += writeSync(fd, buf, off, n - off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
  }
}

function sendLine(secret, tail) {  // the supervisor's line, byte by byte (no method a program could replace)
  const s = '\x1evr:' + secret + tail;
  const b = bufferAlloc(s.length);
  for (let i = 0; i < s.length; i++) b[i] = apply(charCodeAt, s, [i]);
  writeAll(2, b, s.length);
}

function apart(run) {  // this program needs what sharing cannot give it: rerun as a process of its own
  sendLine(run.secret, '!\n');
  exit(0);
}

function output(fd) {  // a pipe's process.stdout is synchronous on Linux: so is this one
  const w = new Writable({
    write(chunk, encoding, cb) {
      try { writeAll(fd, typeof chunk === 'string' ? bufferFrom(chunk, encoding) : chunk); } catch (e) { cb(e); return; }
      cb();
    },
  });
  w.fd = fd;
  w._type = 'pipe';
  w._isStdio = true;
  w.destroySoon = w.destroy;
  return w;
}

function isSpecial(p) {  // a path into /proc or /dev/fd (the process's memory, the harness's pipes)
  let s;
  if (typeof p === 'string') s = p;
  else if (p instanceof URL) s = p.protocol === 'file:' ? p.pathname : '';
  else if (Buffer.isBuffer(p)) s = p.toString();
  else return false;
  s = resolvePath(s);
  try { s = realpath(s); } catch { /* not there (yet): its name is what counts */ }
  return apply(startsWith, s, ['/proc']) || apply(startsWith, s, ['/dev/fd']) || apply(startsWith, s, ['/dev/std']);
}

function stdinFs(run, input) {  // fs, but fd 0 and /dev/stdin are this test's input, /proc is not for sharing
  let pos = 0;
  const own = {
    readFileSync(p, opts) {
      if (!STDIN_PATHS.has(p)) return apply(readFileSync, fs, arguments);
      const enc = typeof opts === 'string' ? opts : opts && opts.encoding;
      const rest = input.subarray(pos);
      pos = input.length;
      return enc ? rest.toString(enc) : bufferFrom(rest);
    },
    readFile(p, opts, cb) {
      if (!STDIN_PATHS.has(p)) return apply(readFile, fs, arguments);
      if (typeof opts === 'function') [opts, cb] = [undefined, opts];
      const data = own.readFileSync(p, opts);
      process.nextTick(cb, null, data);
    },
    readSync(fd, buffer, offset, length, position) {
      if (fd !== 0) return apply(readSync, fs, arguments);
      if (offset !== null && typeof offset === 'object') ({ offset = 0, length = buffer.byteLength - offset } = offset);
      offset = offset || 0;
      if (length === undefined) length = buffer.byteLength - offset;
      const n = Math.max(0, Math.min(length, input.length - pos));
      input.copy(buffer, offset, pos, pos + n);
      pos += n;
      return n;
    },
  };
  const guard = (target) => new Proxy(target, {
    get(o, k) {
      if (o === fs && apply(hasOwn, own, [k])) return own[k];
      const v = o[k];
      if (k === 'promises' && v && typeof v === 'object') return guard(v);
      if (typeof v !== 'function') return v;
      return function (...args) {
        if (args.length && !STDIN_PATHS.has(args[0]) && isSpecial(args[0])) apart(run);
        if (typeof args[1] === 'string' && isSpecial(args[1])) apart(run);  // symlink, rename, copy targets
        return apply(v, o, args);
      };
    },
  });
  return guard(fs);
}

function makeProcess(run, stdin, stdout, stderr) {
  const proc = { stdin, stdout, stderr, argv: [process.argv[0], filename], env: { ...process.env }, exitCode: undefined };
  for (const k of PROCESS_VALUES) proc[k] = process[k];
  for (const k of PROCESS_CALLS) if (typeof process[k] === 'function') proc[k] = process[k].bind(process);
  if (process.hrtime.bigint) proc.hrtime.bigint = process.hrtime.bigint.bind(process);
  const passOn = (name) => function (event, fn) {  // a listener on process would outlive the test
    run.dirty = true;
    process[name](event, fn);
    return proc;
  };
  for (const name of ['on', 'once', 'addListener', 'prependListener', 'prependOnceListener']) proc[name] = passOn(name);
  proc.off = proc.removeListener = (event, fn) => { process.removeListener(event, fn); return proc; };
  proc.listenerCount = (event) => process.listenerCount(event);
  proc.openStdin = () => stdin;
  proc.exit = (code) => exit(code === undefined ? proc.exitCode : code);
  proc.binding = () => apart(run);
  return proc;
}

function runTest() {
  const header = readHeader();  // no method a program could replace sees the secret (no split, no iterator)
  if (header === null) exit(0);
  const input = readFully(header.size);
  const run = { secret: header.secret, dirty: false, proc: null };  // in closures only: never the program's
  const stdin = new PassThrough();
  stdin.fd = 0;
  stdin.end(input);
  const stdout = output(1);
  const stderr = output(2);
  run.proc = makeProcess(run, stdin, stdout, stderr);
  const fsFor = stdinFs(run, input);
  const sandbox = { process: run.proc, console: new Console({ stdout, stderr }) };
  for (const name of GLOBALS) {  // looked up when used: some load their module on first use (fetch)
    if (name in globalThis) {
      defineProperty(sandbox, name, {
        get: () => { const v = globalThis[name]; watchGlobal(name, v); return v; }, configurable: true,
      });
    }
  }
  const ctx = vm.createContext(sandbox, { codeGeneration: { strings: true, wasm: true } });
  // a finalizer may run in a later test (whenever a collection finds its object): the same
  const registry = vm.runInContext('FinalizationRegistry', ctx);
  sandbox.FinalizationRegistry = new Proxy(registry, {
    construct(target, args, newTarget) { run.dirty = true; return construct(target, args, newTarget); },
  });
  const module = vm.runInContext('globalThis.global = globalThis; ({ id: ".", loaded: false, children: [], paths: [], exports: {} })', ctx);
  module.filename = filename;
  module.path = path.dirname(filename);
  const req = function require(id) {
    const bare = typeof id === 'string' ? id.replace(/^node:/, '') : id;
    if (bare === 'fs') { watchModule('fs'); return fsFor; }
    if (bare === 'process') return run.proc;
    if (APART.has(bare)) apart(run);
    if (builtins.has(bare)) { watchModule(bare); return hostRequire(bare); }
    const e = new Error(`Cannot find module '${id}'\nRequire stack:\n- ${filename}`);
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  };
  req.main = module;
  req.cache = create(null);
  req.resolve = (id) => { if (builtins.has(String(id).replace(/^node:/, ''))) return id; return req(id); };
  module.require = req;
  state = run;
  programRan = true;
  apply(script.runInContext(ctx), module.exports, [module.exports, req, module, filename, path.dirname(filename)]);
  module.loaded = true;
}

process.on('beforeExit', () => {  // the loop is empty: where a fresh node would exit
  const run = state;
  const code = run.proc.exitCode;
  if (run.dirty || (code !== undefined && code !== null && code !== 0) || leftState()) exit(code || 0);
  state = null;
  freshBufferPool();
  sendLine(run.secret, '\n');
  immediate(runTest);
});
runTest();

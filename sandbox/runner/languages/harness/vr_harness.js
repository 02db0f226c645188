// One node serving a job's stdio tests (sandbox/runner/languages/harness.py): per test, the
// program as a CommonJS main module in a fresh vm context (its globals and builtins' prototypes
// start over), with process.stdin/stdout/stderr, console and require('fs')'s reads of fd 0 of
// its own. A test ends where a fresh node would exit: when the event loop has nothing left
// ('beforeExit'); then one line on stderr says "ended as a clean exit 0" and the next test runs.
// Anything else a fresh node would end with (an uncaught exception, process.exit, an exit code
// set, a listener on process) ends this node that way, and the next test gets a fresh one.
//
// The vm is not a boundary: the program can reach this file's objects (assume it can), and so
// the test's secret the line carries (sent with its input). The sandbox isolates, the
// supervisor judges; the line, if forged, means no more than process.exit(0) at that point.
'use strict';
const fs = require('fs');
const vm = require('vm');
const path = require('path');
const { PassThrough, Writable } = require('stream');
const { Console } = require('console');
const Module = require('module');
const hostRequire = require;

const [mainPath] = process.argv.slice(2);
const filename = path.resolve(mainPath);
let source = fs.readFileSync(filename, 'utf8');
if (source.startsWith('#!')) source = '//' + source.slice(2);  // node ignores a shebang line
const script = new vm.Script(Module.wrap(source), { filename });
const STDIN_PATHS = new Set([0, '0', '/dev/stdin', '/proc/self/fd/0', '/dev/fd/0']);
const GLOBALS = ['Buffer', 'setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval',
  'clearImmediate', 'queueMicrotask', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'structuredClone',
  'atob', 'btoa', 'AbortController', 'AbortSignal', 'Event', 'EventTarget', 'performance', 'fetch',
  'BroadcastChannel', 'MessageChannel', 'MessagePort', 'Blob'];
let state = null;

function readLine() {  // the next test's header from fd 0 ("<secret> <bytes>\n"), blocking
  const b = Buffer.alloc(1);
  let s = '';
  for (;;) {
    let n;
    try { n = fs.readSync(0, b, 0, 1, null); } catch (e) { if (e.code === 'EAGAIN') continue; throw e; }
    if (n === 0) return null;
    if (b[0] === 10) return s;
    s += String.fromCharCode(b[0]);
  }
}

function readFully(n) {
  const buf = Buffer.alloc(n);
  for (let off = 0; off < n;) {
    let k;
    try { k = fs.readSync(0, buf, off, n - off, null); } catch (e) { if (e.code === 'EAGAIN') continue; throw e; }
    if (k === 0) throw new Error('stdin ended inside a test\'s input');
    off += k;
  }
  return buf;
}

function writeAll(fd, data) {
  const buf = typeof data === 'string' ? Buffer.from(data) : data;
  for (let off = 0; off < buf.length;) {
    try { off += fs.writeSync(fd, buf, off, buf.length - off); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
  }
}

function output(fd) {  // a pipe's process.stdout is synchronous on Linux: so is this one
  const w = new Writable({
    write(chunk, encoding, cb) {
      try { writeAll(fd, typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk); } catch (e) { cb(e); return; }
      cb();
    },
  });
  w.fd = fd;
  w._type = 'pipe';
  w._isStdio = true;
  w.destroySoon = w.destroy;
  return w;
}

function stdinFs(input) {  // fs, but fd 0 and /dev/stdin are this test's input
  const f = Object.create(fs);
  let pos = 0;
  f.readFileSync = function (p, opts) {
    if (!STDIN_PATHS.has(p)) return fs.readFileSync(p, opts);
    const enc = typeof opts === 'string' ? opts : opts && opts.encoding;
    const rest = input.subarray(pos);
    pos = input.length;
    return enc ? rest.toString(enc) : Buffer.from(rest);
  };
  f.readFile = function (p, opts, cb) {
    if (!STDIN_PATHS.has(p)) return fs.readFile.apply(fs, arguments);
    if (typeof opts === 'function') [opts, cb] = [undefined, opts];
    const data = f.readFileSync(p, opts);
    process.nextTick(cb, null, data);
  };
  f.readSync = function (fd, buffer, offset, length, position) {
    if (fd !== 0) return fs.readSync.apply(fs, arguments);
    if (offset !== null && typeof offset === 'object') ({ offset = 0, length = buffer.byteLength - offset } = offset);
    offset = offset || 0;
    if (length === undefined) length = buffer.byteLength - offset;
    const n = Math.max(0, Math.min(length, input.length - pos));
    input.copy(buffer, offset, pos, pos + n);
    pos += n;
    return n;
  };
  return f;
}

function runTest() {
  const header = readLine();
  if (header === null) process.exit(0);
  const [secret, size] = header.split(' ');
  const input = readFully(Number(size));
  const stdin = new PassThrough();
  stdin.fd = 0;
  stdin.end(input);
  const stdout = output(1);
  const stderr = output(2);
  const t = { secret, dirty: false, proc: null };
  const proc = Object.create(process);
  const passOn = (name) => function (event, fn) {  // a listener on process would outlive the test
    t.dirty = true;
    process[name](event, fn);
    return proc;
  };
  for (const name of ['on', 'once', 'addListener', 'prependListener', 'prependOnceListener']) proc[name] = passOn(name);
  const own = {
    stdin, stdout, stderr, argv: [process.argv[0], filename], argv0: process.argv0, exitCode: undefined,
    openStdin: () => stdin,
    exit: (code) => process.exit(code === undefined ? proc.exitCode : code),
  };
  for (const [k, v] of Object.entries(own)) Object.defineProperty(proc, k, { value: v, writable: true, configurable: true, enumerable: true });
  t.proc = proc;
  const fsFor = stdinFs(input);
  const module = { id: '.', filename, path: path.dirname(filename), loaded: false, children: [], paths: [],
    exports: {} };
  const req = function require(id) {
    const bare = typeof id === 'string' ? id.replace(/^node:/, '') : id;
    if (bare === 'fs') return fsFor;
    if (bare === 'process') return proc;
    if (Module.builtinModules.includes(bare)) return hostRequire(bare);
    const e = new Error(`Cannot find module '${id}'\nRequire stack:\n- ${filename}`);
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  };
  req.main = module;
  req.cache = Object.create(null);
  req.resolve = (id) => { if (Module.builtinModules.includes(String(id).replace(/^node:/, ''))) return id; return req(id); };
  module.require = req;
  const sandbox = { process: proc, console: new Console({ stdout, stderr }) };
  for (const name of GLOBALS) {  // looked up when used: some load their module on first use (fetch)
    if (name in globalThis) Object.defineProperty(sandbox, name, { get: () => globalThis[name], configurable: true });
  }
  const ctx = vm.createContext(sandbox);
  vm.runInContext('globalThis.global = globalThis', ctx);
  state = t;
  script.runInContext(ctx)(module.exports, req, module, filename, path.dirname(filename));
  module.loaded = true;
}

process.on('beforeExit', () => {  // the loop is empty: where a fresh node would exit
  const t = state;
  const code = t.proc.exitCode;
  if (t.dirty || (code !== undefined && code !== null && code !== 0)) process.exit(code || 0);
  state = null;
  writeAll(2, '\x1evr:' + t.secret + '\n');
  setImmediate(runTest);
});
runTest();

// TypeScript's compile step, run as a candidate by the runner (sandbox/runner/compiled.py):
//   node tsc.js HOME main.ts out/main.js   strip the types of one file into CommonJS
//   node tsc.js HOME --make-cache          write V8's code cache of the compiler (at build)
// HOME holds node_modules/typescript (fetched by sandbox/fetch_typescript.sh). TypeScript's own
// transpileModule is used, one file, no type check: it reads no file but the source (a
// `/// <reference path>` or an import is not followed) and rejects what TypeScript's parser
// rejects. Its output is then parsed by V8 without running (an early error such as a
// redeclared `let` is a compile error too, as for `node --check`). Loading the 9 MB compiler
// is most of the cost (0.30 s CPU); V8's code cache of it, made once per node build, halves
// that, and V8 ignores a cache that does not match its version and flags (slower, never wrong).
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const Module = require("module");

const [home, ...args] = process.argv.slice(2);
const lib = path.join(path.resolve(home), "node_modules", "typescript", "lib", "typescript.js");
const cacheFile = path.join(path.resolve(home), `v8-${process.version}-${process.arch}.cache`);

function loadCompiler(useCache) {
  let cachedData;
  if (useCache) {
    try { cachedData = fs.readFileSync(cacheFile); } catch { cachedData = undefined; }
  }
  const script = new vm.Script(Module.wrap(fs.readFileSync(lib, "utf8")), { filename: lib, cachedData });
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, Module.createRequire(lib), mod, lib, path.dirname(lib));
  return { ts: mod.exports, script };
}

function transpile(ts, source) {
  const compilerOptions = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };
  return ts.transpileModule(source, { compilerOptions, fileName: "main.ts", reportDiagnostics: true });
}

function where(ts, d) {
  if (!d.file || d.start === undefined) return "main.ts";
  const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
  return `main.ts(${line + 1},${character + 1})`;
}

if (args[0] === "--make-cache") {
  if (loadCompiler(true).script.cachedDataRejected === false) process.exit(0); // the one there fits
  const { ts, script } = loadCompiler(false);
  transpile(ts, "namespace N { export enum E { A } }\nconst x: number = N.E.A;\nconsole.log(x);\n");
  const tmp = `${cacheFile}.${process.pid}`;
  fs.writeFileSync(tmp, script.createCachedData());
  fs.renameSync(tmp, cacheFile);
  process.exit(0);
}

const [src, out] = args;
const { ts } = loadCompiler(true);
let result;
try {
  result = transpile(ts, fs.readFileSync(src, "utf8"));
} catch (e) { // e.g. nesting deep enough to overflow the parser's stack
  process.stderr.write(`main.ts: error: TypeScript's compiler failed on it: ${e}\n`);
  process.exit(1);
}
const errors = (result.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
if (errors.length) {
  for (const d of errors) {
    process.stderr.write(`${where(ts, d)}: error TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}\n`);
  }
  process.exit(1);
}
try {
  vm.compileFunction(result.outputText, ["exports", "require", "module", "__filename", "__dirname"],
    { filename: "main.js" });
} catch (e) {
  process.stderr.write(`main.ts: error: the JavaScript it strips to does not parse: ${e}\n`);
  process.exit(1);
}
fs.writeFileSync(out, result.outputText);

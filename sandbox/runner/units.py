"""Test-spec compilation: how a spec's names resolve, how a check() splits into tests, their
labels, and the one count of a spec's tests (exact, or an upper bound before parsing).

Standard library only, with no process or socket of its own: the verdict process compiles
with it, and the supervisor and the server count with it.
"""

from __future__ import annotations

import ast
import builtins
import sys
from typing import Any, NamedTuple

BUILTIN_NAMES = set(dir(builtins))
STDLIB = set(getattr(sys, "stdlib_module_names", ()))


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _nodes(*trees: ast.AST, leaves: frozenset = frozenset({ast.Name})) -> list:
    """Every node of the trees, not looking below a node whose type is a leaf. A loop of our
    own: ast.walk and ast.NodeVisitor go through a generator or a getattr dispatch per node
    and cost ~3x as much (a fifth of compiling a HumanEval check)."""
    out: list = []
    stack: list = list(trees)
    pop, push, keep, AST = stack.pop, stack.append, out.append, ast.AST
    while stack:
        node = pop()
        keep(node)
        if type(node) in leaves:
            continue
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
    return out


_BINDING_LEAVES = frozenset({ast.Name, ast.arg, ast.alias})


def _raw_free(*trees: ast.AST) -> frozenset[str]:
    """Names loaded but bound nowhere, scopes ignored. An argument's annotation and an alias
    are not looked into."""
    loaded: set[str] = set()
    bound: set[str] = set()
    Name, Load = ast.Name, ast.Load
    for node in _nodes(*trees, leaves=_BINDING_LEAVES):
        kind = type(node)
        if kind is Name:
            (loaded if type(node.ctx) is Load else bound).add(node.id)
        elif kind is ast.arg:
            bound.add(node.arg)
        elif kind is ast.alias:
            bound.add((node.asname or node.name).split(".")[0])
        elif kind in _DEFS or (kind is ast.ExceptHandler and node.name):
            bound.add(node.name)
    return frozenset(loaded - bound)


def _name_ids(*trees: ast.AST) -> set[str]:
    return {node.id for node in _nodes(*trees) if type(node) is ast.Name}


class Names(NamedTuple):
    """How the free names of a task's test code resolve, decided from the task alone (never
    from what the program defines): a call reaches the candidate only through a name the
    task says is the candidate's."""

    candidate: frozenset[str]  # proxies: calls go to the program
    stdlib: frozenset[str]  # modules imported here
    unknown: frozenset[str]  # left unbound: a NameError, explained, in the tests that use them
    guarded: frozenset[str]  # builtins, modules and helpers the tests use: a program defining one is flagged
    helpers: frozenset[str]  # the helpers among `guarded` (task code defined on our side)


def resolve_names(raw: frozenset[str], used: set[str], helper_names: frozenset[str], declared: frozenset[str],
                  list_style: bool) -> Names:
    """The candidate's names are the declared ones (entry point, fn_name, candidate_names),
    and for an MBPP assert list also every free name that is not a builtin, a stdlib module
    or a helper. Builtins and stdlib modules stay ours unless declared; anything else free
    is unknown (a helper the task did not give us is never taken from the program)."""
    free = raw - helper_names
    cand = set(declared)
    if list_style:
        cand |= {n for n in free if n not in BUILTIN_NAMES and n not in STDLIB}
    ours = free - cand
    stdlib = frozenset(n for n in ours if n in STDLIB and n not in BUILTIN_NAMES)
    unknown = frozenset(n for n in ours if n not in BUILTIN_NAMES and n not in STDLIB)
    used_helpers = frozenset(helper_names & used) - cand
    guarded = frozenset(n for n in ours if n in BUILTIN_NAMES or n in STDLIB) | used_helpers
    return Names(frozenset(cand), stdlib, unknown, guarded, used_helpers)


def free_names(*trees: ast.AST, declared: frozenset[str] = frozenset(), list_style: bool = True) -> set[str]:
    """The names of test code that route to the candidate (see resolve_names)."""
    raw = _raw_free(*trees)
    return set(resolve_names(raw, _name_ids(*trees), frozenset(), declared, list_style).candidate)


class Compiled:
    """What a test spec compiles to, before any candidate is known: how its free names
    resolve, its code objects, its units' labels. Kept per verdict process, which outlives
    jobs, because a GRPO group's completions share their tests."""

    def __init__(self, names: Names, labels: list[str], module=None, setup=None, units: list | None = None,
                 helpers=None) -> None:
        self.names = names
        self.labels = labels
        self.module = module  # check(): the whole test module
        self.setup = setup  # assert list: the setup code, if any
        self.units = units  # code objects (assert list) or the module's unit function names (split check)
        self.helpers = helpers  # the task's helper code, run first


_COMPILED: dict[tuple, Compiled] = {}
COMPILED_MAX = 256  # specs, and the characters of their sources: the process is long-lived
COMPILED_MAX_CHARS = 32 << 20
_compiled_chars = 0


def _declared(spec: dict) -> tuple[str, ...]:
    names = [n for n in spec.get("candidate_names") or () if type(n) is str]
    if spec.get("entry_point") and "asserts" not in spec:
        names.append(spec["entry_point"])
    return tuple(sorted(set(names)))


def compiled(spec: dict) -> Compiled:
    helpers, prompt = spec.get("helpers", "") or "", spec.get("prompt", "") or ""
    if "asserts" in spec:
        setup = spec.get("setup", "") or ""
        key: tuple = ("list", setup, tuple(spec["asserts"]), helpers, _declared(spec))
        size = len(setup) + sum(map(len, spec["asserts"]))
    else:
        key = ("check", spec["test"], spec["entry_point"], bool(spec.get("split_asserts", True)), helpers, prompt,
               _declared(spec))
        size = len(spec["test"]) + len(prompt)
    size += len(helpers)
    c = _COMPILED.get(key)
    if c is None:
        global _compiled_chars
        c = _compile_list(spec) if key[0] == "list" else _compile_check(spec)
        if len(_COMPILED) >= COMPILED_MAX or _compiled_chars + size > COMPILED_MAX_CHARS:
            _COMPILED.clear()
            _compiled_chars = 0
        _COMPILED[key] = c
        _compiled_chars += size
    return c


def _helper_tree(spec: dict) -> ast.Module | None:
    """The task's helpers: `helpers` as given, and from a HumanEval `prompt` every import,
    definition and assignment at its top level except the entry point itself (the part the
    candidate completes)."""
    body: list[ast.stmt] = []
    if (spec.get("helpers") or "").strip():
        body += ast.parse(spec["helpers"]).body
    prompt = spec.get("prompt") or ""
    if prompt.strip():
        entry = spec.get("entry_point")
        try:
            tree = ast.parse(prompt)
        except SyntaxError:
            tree = ast.parse(prompt + "\n    pass\n")  # a prompt that ends at the entry point's signature
        keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign)
        for stmt in tree.body:
            if isinstance(stmt, keep) and entry not in _bound_here(stmt) and not _defines(stmt, entry):
                body.append(stmt)
    return ast.Module(body=body, type_ignores=[]) if body else None


def _defines(stmt: ast.stmt, name: str | None) -> bool:
    """A class of the prompt's that holds the entry point (`class Solution: def f(...)`) is the
    candidate's to complete, not a helper."""
    return isinstance(stmt, ast.ClassDef) and any(
        type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.name == name for n in _nodes(stmt, leaves=frozenset()))


def _bound_here(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(stmt, _DEFS):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return {n.id for t in targets if t is not None for n in _nodes(t) if type(n) is ast.Name}


def _compile_helpers(tree: ast.Module | None):
    # dont_inherit: our own `from __future__` must not change the helpers' code (their
    # digest is compared with the program's definitions of the same names)
    return compile(tree, "<helpers>", "exec", dont_inherit=True) if tree is not None else None


def _compile_list(spec: dict) -> Compiled:
    setup = spec.get("setup", "") or ""
    trees = [ast.parse(setup)] + [ast.parse(a) for a in spec["asserts"]]
    htree = _helper_tree(spec)
    hnames = _top_bound(htree)
    raw = _raw_free(*trees, *([htree] if htree else []))
    names = resolve_names(raw, _name_ids(*trees), hnames, frozenset(_declared(spec)), list_style=True)
    codes = [compile(tree, f"<test {i}>", "exec") for i, tree in enumerate(trees[1:])]
    return Compiled(names, [a.strip()[:200] for a in spec["asserts"]],
                    setup=compile(trees[0], "<setup>", "exec") if setup.strip() else None, units=codes,
                    helpers=_compile_helpers(htree))


def _top_bound(tree: ast.Module | None) -> frozenset[str]:
    return frozenset().union(*(_bound_here(s) for s in tree.body)) if tree is not None else frozenset()


def _compile_check(spec: dict) -> Compiled:
    tree = ast.parse(spec["test"])
    htree = _helper_tree(spec)
    hnames = _top_bound(htree)
    raw = _raw_free(tree, *([htree] if htree else []))
    names = resolve_names(raw, _name_ids(tree), hnames, frozenset(_declared(spec)), list_style=False)
    helpers = _compile_helpers(htree)
    if spec.get("split_asserts", True):
        # the shape depends on the task alone, never on the candidate: the same tests whatever it defines
        split = _split_shape(spec["test"], tree, htree, names.candidate | names.unknown)
        if split:
            module = compile(_with_unit_functions(tree, split), "<test>", "exec")
            return Compiled(names, split.labels, module=module,
                            units=[_unit_name(i) for i in range(len(split.asserts))], helpers=helpers)
    return Compiled(names, ["check(candidate)"], module=compile(tree, "<test>", "exec"), helpers=helpers)


def _unit_name(i: int) -> str:
    return f"<check assert {i}>"  # not an identifier: no test code can name or replace it


def _with_unit_functions(tree: ast.Module, split: _Split) -> ast.Module:
    """The test module, one compile for all: each assert becomes a function of its own,
    `def <check assert i>(candidate): <setup>; <assert>`, i.e. check() holding that assert
    alone, so it runs with check's own scoping. check() itself keeps an empty body when
    nothing but its definition refers to it: its asserts are compiled once, in the units.
    Every statement keeps its parsed location (no fix_missing_locations: a walk of the
    whole tree that cost as much as compiling it)."""
    fn = split.check
    others = [n for n in tree.body if n is not fn]
    body = list(tree.body)
    if not fn.decorator_list and "check" not in _raw_free(*others):
        stub = ast.Pass(lineno=fn.lineno, col_offset=fn.col_offset, end_lineno=fn.lineno,
                        end_col_offset=fn.col_offset)
        body[body.index(fn)] = ast.FunctionDef(
            name="check", args=fn.args, body=[stub], decorator_list=[], returns=None, type_comment=None,
            lineno=fn.lineno, col_offset=fn.col_offset, end_lineno=fn.end_lineno, end_col_offset=fn.end_col_offset)
    for i, stmt in enumerate(split.asserts):
        body.append(ast.FunctionDef(
            name=_unit_name(i), args=fn.args, body=split.setup + [stmt], decorator_list=[], returns=None,
            type_comment=None, lineno=stmt.lineno, col_offset=stmt.col_offset, end_lineno=stmt.end_lineno,
            end_col_offset=stmt.end_col_offset))
    return ast.Module(body=body, type_ignores=[])


class _Split(NamedTuple):
    """A flat check() seen as separate tests: each assert that touches the candidate, with
    the imports and assignments before them as the setup every one of them runs first."""

    check: ast.FunctionDef
    setup: list[ast.stmt]
    asserts: list[ast.Assert]
    labels: list[str]


def _split_shape(source: str, tree: ast.Module, helpers: ast.Module | None, cand_names: frozenset[str]) -> _Split | None:
    """Each assert of a flat check() is a test; leading imports and assignments are its setup.
    An assert is left out only when it cannot reach the candidate: it names neither the
    parameter, nor a candidate name, nor anything the candidate's results or arguments flow
    into (a setup variable `out = candidate(x)`, an alias `f = candidate`, a module-level
    function that calls the entry point), so nothing that tests the candidate is dropped."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if fn is None or len(fn.args.args) != 1 or fn.args.vararg or fn.args.kwarg:
        return None
    param = fn.args.args[0].arg
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    body = [s for s in body if not isinstance(s, ast.Pass)]
    setup, asserts = [], []
    for stmt in body:
        if isinstance(stmt, ast.Assert):
            asserts.append(stmt)
        elif asserts or not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign)):
            return None
        else:
            setup.append(stmt)
    if len(asserts) < 2:
        return None
    module_level = [n for n in tree.body if n is not fn] + (helpers.body if helpers is not None else [])
    uses = _tainted(set(cand_names), module_level) | {param}
    uses = _tainted(uses, setup, names_too=True)
    # an assert that never touches the candidate (`assert True`) tests nothing
    relevant = [a for a in asserts if not uses.isdisjoint(_name_ids(a))]
    if not relevant:
        return None
    lines = source.splitlines()
    return _Split(fn, setup, relevant, [_label(lines, stmt, i) for i, stmt in enumerate(relevant)])


def _tainted(uses: set[str], stmts: list[ast.stmt], names_too: bool = False) -> set[str]:
    """`uses` grown by what the statements bind from it: a statement that names a name in
    `uses` adds the names it binds, and with `names_too` every name it mentions (setup such
    as `r = candidate(xs)` may change `xs` in place). Repeated until nothing changes, so
    the order of module-level definitions does not matter."""
    uses = set(uses)
    pending = [(s, _name_ids(s), _bound_here(s) if isinstance(s, _TOP_BINDERS) else set()) for s in stmts]
    changed = True
    while changed:
        changed = False
        for _stmt, mentioned, bound in pending:
            if uses.isdisjoint(mentioned):
                continue
            grow = bound | ({n for n in mentioned if n not in BUILTIN_NAMES} if names_too else set())
            if not grow <= uses:
                uses |= grow
                changed = True
    return uses


_TOP_BINDERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign,
                ast.AnnAssign)


def _label(lines: list[str], stmt: ast.stmt, i: int) -> str:
    """The statement's first source line (ast.get_source_segment re-splits the whole
    source on every call, which is quadratic in the number of asserts)."""
    try:
        text = lines[stmt.lineno - 1][stmt.col_offset :]
    except (IndexError, TypeError):
        text = ""
    return (text.strip() or f"assert #{i}")[:200]


def labels(spec: dict) -> list[str]:
    """The tests a spec holds, exactly, from its syntax alone (no code runs): the same list
    the verdict process runs, known before any candidate exists. Raises on test code that
    does not parse (the task's error)."""
    if spec["kind"] in ("call", "stdio"):
        return [f"case {i}" for i in range(len(spec["cases"]))]
    return list(compiled(spec).labels)


def upper_bound(spec: Any) -> int:
    """At least as many tests as `labels(spec)` finds (and at least 1), without parsing
    anything: what sizes a job's time budget before its tests are compiled, and what the
    server caps on a request's raw JSON before it is validated. Never raises: a malformed
    spec counts 1, and validation refuses it."""
    if not isinstance(spec, dict):
        return 1
    seq = spec.get("cases", spec.get("asserts"))
    if isinstance(seq, list):
        return max(1, len(seq))
    test = spec.get("test")
    # a split check() runs one test per top-level assert, each spelled "assert"
    return max(1, test.count("assert")) if isinstance(test, str) else 1

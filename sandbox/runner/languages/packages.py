"""Which host files the toolchains need, from Debian's package database: a bwrap view of /usr
that holds them and nothing else (not the whole host /usr).

For each language whose tools are found, the packages owning the tools' files, closed over
Depends and Pre-Depends (dpkg's status file, installed packages only), give the files
(their .list files); the shared libraries the tools link (ldd) are added where a package
forgot one. What a host binds is the smallest cover of that set: a directory whose entries
are all in it is bound whole, else its files one by one; symlinks are made again as links.
Documentation, manuals and translations are left out. Read on the host at start-up, once per
process; a host without dpkg gets None (then the caller decides: no tight view).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from .spec import Language, missing_tool, resolve

DPKG = "/var/lib/dpkg"
ROOT = "/usr"
SKIP = tuple(f"/usr/share/{d}/" for d in ("doc", "man", "info", "lintian", "locale", "bug", "doc-base", "bash-completion"))
_DEP_NAME = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)")
_LDD_PATH = re.compile(r"(/\S+) \(0x")


@dataclass(frozen=True)
class View:
    """What a host shows of /usr for the toolchains: paths bound read-only (each at the same
    place), symlinks (path, target) to make, and the packages they come from."""

    binds: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    packages: tuple[str, ...]

    def visible_files(self) -> int:
        """Regular files visible under /usr through the binds (a directory's whole tree counts)."""
        n = 0
        for b in self.binds:
            if not os.path.isdir(b):
                n += 1
                continue
            for r, _ds, fs in os.walk(b):
                n += sum(1 for f in fs if os.path.isfile(os.path.join(r, f)) and not os.path.islink(os.path.join(r, f)))
        return n


def _installed() -> dict[str, list[list[str]]]:
    """Installed package -> its Depends and Pre-Depends, each a list of alternatives; virtual
    names (Provides) map to every package that provides them. The base system (Essential or
    Priority: required: dpkg, tar, debconf, util-linux...) is not a toolchain's: packages
    depend on it for their install scripts, so it is left out (a library of it that a tool
    links comes back through ldd)."""
    deps: dict[str, list[list[str]]] = {}
    provides: dict[str, set[str]] = {}
    with open(os.path.join(DPKG, "status"), encoding="utf-8", errors="replace") as f:
        stanzas = f.read().split("\n\n")
    for stanza in stanzas:
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t"):
                if key:
                    fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "installed" not in fields.get("Status", "").split():
            continue
        if fields.get("Essential") == "yes" or fields.get("Priority") == "required":
            continue
        groups = []
        for field in ("Pre-Depends", "Depends"):
            for group in filter(None, (g.strip() for g in fields.get(field, "").split(","))):
                groups.append([m.group(1) for alt in group.split("|") if (m := _DEP_NAME.match(alt))])
        deps[name] = groups
        for p in filter(None, (p.strip() for p in fields.get("Provides", "").split(","))):
            if m := _DEP_NAME.match(p):
                provides.setdefault(m.group(1), set()).add(name)
    for virtual, real in provides.items():
        if virtual not in deps:
            deps[virtual] = [sorted(real)]  # a virtual name: any of those that provide it
    return deps


def closure(roots: set[str], deps: dict[str, list[list[str]]]) -> set[str]:
    """`roots` and every installed package they depend on (each installed alternative)."""
    seen: set[str] = set()
    todo = [r for r in roots if r in deps]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for group in deps.get(p, []):
            todo += [alt for alt in group if alt in deps and alt not in seen]
    return seen


def _list_file(pkg: str) -> str | None:
    info = os.path.join(DPKG, "info")
    for name in (f"{pkg}.list", *(n for n in _arch_lists() if n.startswith(pkg + ":"))):
        path = os.path.join(info, name)
        if os.path.exists(path):
            return path
    return None


@functools.cache
def _arch_lists() -> tuple[str, ...]:
    return tuple(n for n in os.listdir(os.path.join(DPKG, "info")) if n.endswith(".list") and ":" in n)


@functools.cache
def _real_dir(d: str) -> str:
    return os.path.realpath(d)


def _normal(path: str) -> str:
    """A listed path with its directories resolved (/bin/x -> /usr/bin/x on merged /usr)."""
    return os.path.join(_real_dir(os.path.dirname(path)), os.path.basename(path))


def owner_of(paths: list[str]) -> set[str]:
    """The installed packages that list any of `paths` (compared after resolving directories)."""
    wanted = {_normal(p) for p in paths}
    names = {os.path.basename(p) for p in wanted}
    found = set()
    for name in os.listdir(os.path.join(DPKG, "info")):
        if not name.endswith(".list"):
            continue
        with open(os.path.join(DPKG, "info", name), encoding="utf-8", errors="replace") as f:
            lines = (line.rstrip("\n") for line in f)
            if any(_normal(x) in wanted for x in lines if x[x.rfind("/") + 1 :] in names):
                found.add(name[: -len(".list")].split(":")[0])
    return found


def _chain(path: str) -> tuple[list[tuple[str, str]], str]:
    """The symlinks on the way from `path` to its file ((link, target) each) and the file."""
    links = []
    for _ in range(40):
        path = _normal(path)
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        links.append((path, target))
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return links, path


def _ldd(paths: list[str]) -> set[str]:
    if shutil.which("ldd") is None or not paths:
        return set()
    out = subprocess.run(["ldd", *paths], capture_output=True, text=True, timeout=60).stdout
    return {m.group(1) for m in _LDD_PATH.finditer(out)}


def view(langs: list[Language]) -> View | None:
    """The view of /usr that the toolchains of `langs` (those found here) need, or None where
    this host has no Debian package database."""
    if not os.path.exists(os.path.join(DPKG, "status")):
        return None
    found = [lang for lang in langs if missing_tool(lang) is None]
    links: dict[str, str] = {}
    tool_files = []
    for lang in found:
        for tool in lang.tools:
            chain, real = _chain(resolve(tool) or tool)
            links.update(chain)
            tool_files.append(real)
    deps = _installed()
    pkgs = closure(owner_of(tool_files), deps)
    files: set[str] = set()
    for pkg in sorted(pkgs):
        lst = _list_file(pkg)
        if lst is None:
            continue
        with open(lst, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = _normal(line.rstrip("\n"))
                if not path.startswith(ROOT + "/") or path.startswith(SKIP):
                    continue
                if os.path.islink(path):
                    links[path] = os.readlink(path)
                elif os.path.isfile(path):
                    files.add(path)
    for lib in _ldd(tool_files):  # a library a package failed to declare
        chain, real = _chain(lib)
        links.update(chain)
        files.add(real)
    files.update(t for t in tool_files if t.startswith(ROOT + "/"))
    return _cover(files, {p: t for p, t in links.items() if p.startswith(ROOT + "/")}, sorted(pkgs))


def _cover(files: set[str], links: dict[str, str], pkgs: list[str]) -> View:
    """The fewest binds that show exactly `files` (and `links`) under /usr."""
    wanted = files | set(links)
    dirs_with: set[str] = set()
    for p in wanted:
        d = os.path.dirname(p)
        while d.startswith(ROOT) and d not in dirs_with:
            dirs_with.add(d)
            d = os.path.dirname(d)

    @functools.cache
    def whole(d: str) -> bool:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return False
        for e in entries:
            if e.path in wanted or (e.name == "__pycache__" and e.is_dir(follow_symlinks=False)):
                continue  # a wanted file, or the byte code of the wanted .py beside it
            if e.is_dir(follow_symlinks=False) and whole(e.path):
                continue  # a directory of wanted files only (or an empty one)
            return False
        return True

    binds: list[str] = []
    made_links: list[tuple[str, str]] = []

    def walk(d: str) -> None:
        if whole(d):
            binds.append(d)
            return
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            if e.path in links:
                made_links.append((e.path, links[e.path]))
            elif e.path in files:
                binds.append(e.path)
            elif e.path in dirs_with and e.is_dir(follow_symlinks=False):
                walk(e.path)

    walk(ROOT)
    return View(binds=tuple(binds), links=tuple(made_links), packages=tuple(pkgs))

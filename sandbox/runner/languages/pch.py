"""A precompiled bits/stdc++.h for C++'s default flags, and the archive of what it leaves out.

Made once per toolchain, outside any job: at image build (sandbox/Dockerfile.toolchains) or
by the bwrap host in a cache directory of the host it then binds read-only. g++ checks a
precompiled header against the flags and the compiler and ignores one that does not match,
so a stale one costs speed, never a wrong build. About 100 MB per flag set.

The header compiled is <bits/stdc++.h> followed by the explicit instantiation declarations of
stdcxx_extern.h: without them every TU instantiates ~1100 library templates the header's
inline functions use (GCC writes a PCH before it instantiates them), ~1/3 of a small
program's build. Their definitions are compiled here once, with the same flags, one object
per declaration, into libvrstdcxx.a, which the compile step links after the program (the
linker takes only the objects a program calls). A TU that does not use the PCH sees no
declaration and needs nothing from the archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil

from .spec import resolve, toolchain_id
from .table import CPP, CPP_FLAGS

GCH = os.path.join("bits", "stdc++.h.gch")
ARCHIVE = "libvrstdcxx.a"
EXTERN_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stdcxx_extern.h")


# built and linked with the new PCH and archive before they are installed: a g++ where a line
# no longer matches what the library uses fails here (then the plain header's PCH), never in a job
SMOKE = r"""#include <bits/stdc++.h>
int main(int argc, char** argv) {
  std::string s = std::to_string(argc) + std::to_string(1.5) + argv[0]; std::wstring w = std::to_wstring(argc);
  char b[64]; auto r = std::to_chars(b, b + 64, argc, 7); std::filesystem::path p(s);
  std::u16string u = p.u16string(); std::u32string v = p.u32string(); std::wstring pw = p.wstring();
  std::promise<void> pr; auto f = pr.get_future(); std::thread t([&] { pr.set_value(); }); f.wait(); t.join();
  auto m = std::make_shared<std::mutex>(); std::once_flag once; std::call_once(once, [] {});
  return std::stoi(s) + (int)std::stold(s) + (int)std::stof(s) + (int)std::stoull(s) + (int)std::stoll(s)
    + (int)std::cyl_bessel_jf(0.5f, 1.f) + (int)std::assoc_laguerrel(1, 1, 0.5L) + (int)std::riemann_zeta(2.0)
    + (int)std::stol(w) + (int)(r.ptr - b) + (int)u.size() + (int)v.size() + (int)pw.size() + (int)m.use_count();
}
"""


def declarations() -> list[str]:
    """The explicit instantiation declarations of stdcxx_extern.h, one per line."""
    with open(EXTERN_H, encoding="utf-8") as f:
        return [line.strip() for line in f if line.startswith("extern template ")]


def header() -> str | None:
    """Where g++ finds bits/stdc++.h, or None without g++."""
    import subprocess  # noqa: PLC0415 - here: the runner's warm interpreter imports this module (names
    # only) and must not import threading with it (fork handlers in every candidate)

    gxx = resolve("g++")
    if gxx is None:
        return None
    try:
        out = subprocess.run([gxx, "-print-file-name=include"], capture_output=True, text=True, timeout=30).stdout
        version = subprocess.run([gxx, "-dumpversion"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    for d in (f"/usr/include/x86_64-linux-gnu/c++/{version}", f"/usr/include/aarch64-linux-gnu/c++/{version}",
              f"/usr/include/c++/{version}", out.strip()):
        path = os.path.join(d, "bits", "stdc++.h")
        if os.path.exists(path):
            return path
    return None


def _archive(gxx: str, tmp: str, decls: list[str]) -> None:
    """tmp/libvrstdcxx.a: each declaration's definition compiled with CPP_FLAGS (and this PCH)."""
    ar = resolve("ar") or shutil.which("ar")
    if ar is None:
        raise OSError("no ar")
    import subprocess  # noqa: PLC0415 - see header()
    from concurrent.futures import ThreadPoolExecutor  # here: the runner imports this module, never builds

    src = os.path.join(tmp, "inst")
    os.makedirs(src)

    def one(i: int) -> str:
        cpp, obj = os.path.join(src, f"i{i:03d}.cpp"), os.path.join(src, f"i{i:03d}.o")
        with open(cpp, "w", encoding="utf-8") as f:
            f.write(f"#include <bits/stdc++.h>\n{decls[i].removeprefix('extern ')}\n")
        subprocess.run([gxx, *CPP_FLAGS, "-I", tmp, "-c", cpp, "-o", obj], check=True, capture_output=True,
                       timeout=300)
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        objs = list(ex.map(one, range(len(decls))))
    subprocess.run([ar, "rcs", os.path.join(tmp, ARCHIVE), *objs], check=True, capture_output=True, timeout=300)
    with open(os.path.join(src, "smoke.cpp"), "w", encoding="utf-8") as f:
        f.write(SMOKE)
    subprocess.run([gxx, *CPP_FLAGS, "-I", tmp, "-Winvalid-pch", "-Werror=invalid-pch", "-static", "-o",
                    os.path.join(src, "smoke"), os.path.join(src, "smoke.cpp"), os.path.join(tmp, ARCHIVE)],
                   check=True, capture_output=True, timeout=300)
    shutil.rmtree(src)


def build(dest: str) -> bool:
    """Make dest/bits/stdc++.h.gch (and dest/libvrstdcxx.a) for CPP_FLAGS; False where there is
    no g++ or it failed. Where the archive cannot be made, the PCH is the plain header's."""
    import subprocess  # noqa: PLC0415 - see header()

    src = header()
    if src is None:
        return False
    if os.path.exists(os.path.join(dest, GCH)):
        return True
    gxx = resolve("g++") or "g++"
    tmp = f"{dest}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "bits"), exist_ok=True)
    gch = os.path.join(tmp, GCH)
    try:
        decls = declarations()
        try:
            with open(os.path.join(tmp, "vr_stdcxx.h"), "w", encoding="utf-8") as f:
                f.write(f"#include <bits/stdc++.h>\n{chr(10).join(decls)}\n")
            subprocess.run([gxx, *CPP_FLAGS, "-x", "c++-header", os.path.join(tmp, "vr_stdcxx.h"), "-o", gch],
                           check=True, capture_output=True, timeout=300)
            _archive(gxx, tmp, decls)
        except (OSError, subprocess.SubprocessError):  # a g++ these lines do not fit: the plain header
            shutil.rmtree(os.path.join(tmp, "inst"), ignore_errors=True)
            for stale in (gch, os.path.join(tmp, ARCHIVE)):
                if os.path.exists(stale):
                    os.unlink(stale)
            subprocess.run([gxx, *CPP_FLAGS, "-x", "c++-header", src, "-o", gch],
                           check=True, capture_output=True, timeout=300)
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        for d, _, files in os.walk(tmp):
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o644)
        try:
            os.rename(tmp, dest)
        except OSError:  # another process made it meanwhile
            pass
        return os.path.exists(os.path.join(dest, GCH))
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def host_dir(base: str | None = None) -> str | None:
    """A host cache directory holding the PCH for this machine's g++ (made when missing),
    or None where there is no g++. VERIREWARD_PCH_DIR overrides the base (~/.cache/verireward/pch)."""
    if resolve("g++") is None:
        return None
    base = base or os.environ.get("VERIREWARD_PCH_DIR") or os.path.expanduser("~/.cache/verireward/pch")
    ident = hashlib.sha256(f"{toolchain_id(CPP)}|{' '.join(CPP_FLAGS)}|{'|'.join(declarations())}".encode()
                           ).hexdigest()[:16]
    dest = os.path.join(base, ident)
    return dest if build(dest) else None

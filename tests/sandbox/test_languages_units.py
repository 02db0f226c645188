"""Units of the languages work: the table's argv and names, the cache key, the compile cache on
a real directory (atomic entries, LRU eviction, merged builds across processes), and the
fence a task's language picks."""

from __future__ import annotations

import multiprocessing
import os
import time

from reward_server.grading.code import extract_code
from sandbox.runner import languages
from sandbox.runner.compile_cache import BuildDir, CompileCache
from sandbox.runner.languages.table import CPP, JAVA, TABLE


def test_names_and_aliases():
    assert languages.get("nodejs") is languages.get("JS") is languages.get("javascript")
    assert languages.get("c++").name == "cpp" and languages.get("golang").name == "go"
    assert languages.get("python") is None and languages.get("cobol") is None
    assert set(languages.available()) == {"python", *(lang.name for lang in TABLE)}


def test_argv_placeholders():
    argv = CPP.argv(CPP.compile, src="main.cpp", out="o", pch="", pchlib="", ld="", main="main")
    assert argv[0].endswith("g++") and "-std=c++17" in argv and "" not in argv
    with_pch = CPP.argv(CPP.compile, src="main.cpp", out="o", pch="-I /opt/verireward/pch", ld="-fuse-ld=gold",
                        pchlib="/opt/verireward/pch/libvrstdcxx.a", main="main")
    assert with_pch[with_pch.index("-I") + 1] == "/opt/verireward/pch" and "-fuse-ld=gold" in with_pch
    # the archive of what the PCH declares extern comes after the program, so the linker takes from it
    assert with_pch.index("/opt/verireward/pch/libvrstdcxx.a") > with_pch.index("main.cpp")
    run = JAVA.argv(JAVA.run, art="/c/k", main="Solution", heap_mb="256", memory_mb="256")
    assert run[-3:] == ["-cp", "/c/k", "Solution"] and "-Xmx256m" in run
    assert "-Xlog:all=warning:stderr" in run  # JVM warnings never on stdout


def test_java_entry_class():
    assert JAVA.source_name("import x;\npublic final class Foo { }") == "Foo.java"
    assert JAVA.source_name("class A {}") == "Main.java"


def test_cache_key_covers_language_flags_source_and_files():
    a = CPP.argv(CPP.compile, src="main.cpp", out="o", pch="", pchlib="", ld="", main="main")
    b = CPP.argv(CPP.compile, src="main.cpp", out="o", pch="-I /p", pchlib="", ld="", main="main")
    k = languages.cache_key(CPP, a, "int main(){}")
    assert k == languages.cache_key(CPP, a, "int main(){}")
    assert len({k, languages.cache_key(CPP, b, "int main(){}"), languages.cache_key(CPP, a, "int main(){ }"),
                languages.cache_key(CPP, a, "int main(){}", b"files"), languages.cache_key(JAVA, a, "int main(){}")}) == 5


def test_cache_entries_are_whole_and_root_owned(tmp_path):
    cache = CompileCache(str(tmp_path / "c"))
    (tmp_path / "scratch").mkdir()
    scratch = os.open(tmp_path / "scratch", os.O_RDONLY | os.O_DIRECTORY)
    build = BuildDir.make(scratch, "build", None)
    (tmp_path / "scratch" / "build" / "main").write_bytes(b"\x7fELF...")
    os.symlink("/etc/passwd", tmp_path / "scratch" / "build" / "link")  # a link in a build is never copied
    (tmp_path / "scratch" / "build" / "sub").mkdir()
    assert cache.get("k1") is None
    entry, why = cache.put("k1", {"ok": True}, build=build)
    assert why == "" and entry.result == {"ok": True}
    assert cache.get("k1").result == {"ok": True}
    assert sorted(os.listdir(cache.path("k1"))) == ["main", "result.json"]
    assert oct(os.stat(cache.root).st_mode & 0o777) == "0o711"
    # no half-made entry left (the key file and the store lock are the cache's own files)
    assert not [n for n in os.listdir(cache.root) if n.startswith(".") and os.path.isdir(cache.path(n))]


def test_cache_evicts_least_recently_used(tmp_path):
    entry_bytes = 5 * 4096  # the directory, the file and result.json, each in pages with its inode
    cache = CompileCache(str(tmp_path / "c"), max_bytes=3 * entry_bytes + 4096)  # three entries fit, four do not
    for i in range(3):
        cache.put(f"k{i}", {"ok": True}, files={"a": b"x" * 1000})[0].release()
        old = time.time() - 100 + i
        os.utime(cache.path(f"k{i}"), (old, old))
    cache.get("k0").release()  # used now: k1 is the least recently used
    cache.put("k3", {"ok": True}, files={"a": b"x" * 1000})[0].release()
    assert cache.get("k1") is None and cache.get("k0") is not None and cache.get("k3") is not None


def _build_once(root: str, counter: str, q) -> None:
    cache = CompileCache(root)
    with cache.building("key", wait_s=10) as waited:
        if cache.get("key") is None:
            with open(counter, "a") as f:
                f.write("built\n")
            time.sleep(0.3)
            cache.put("key", {"ok": True}, files={"a": b"1"})
    q.put(waited)


def test_identical_builds_in_other_processes_merge(tmp_path):
    root, counter = str(tmp_path / "c"), str(tmp_path / "count")
    CompileCache(root)
    q = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_build_once, args=(root, counter, q)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    waited = [q.get(timeout=5) for _ in procs]
    assert open(counter).read().count("built") == 1
    assert sum(waited) >= 1


def test_fence_of_the_tasks_language():
    text = "```python\nprint(1)\n```\n```cpp\nint main(){}\n```\n```c++\nint main(){return 0;}\n```"
    assert extract_code(text, None, "cpp") == ("int main(){return 0;}\n", "last_cpp_fence")
    assert extract_code(text) == ("print(1)\n", "last_python_fence")
    assert extract_code("```js\nconsole.log(1)\n```", None, "javascript")[1] == "last_javascript_fence"
    assert extract_code("```\nfmt\n```", None, "go") == ("fmt\n", "first_fence")

"""NeMo-Skills' own sandbox client and its own tests, run unchanged against this server.

NeMo-Skills is not on PyPI, and importing its package pulls its whole launcher stack (nemo_run,
leptonai, ...). So this loads two files of a NeMo-Skills checkout as they are:
`nemo_skills/code_execution/sandbox.py` (the `LocalSandbox` client) and
`tests/test_code_execution.py` (its tests of that client), with the few helpers they import
from the rest of the package stood in for (a logger name, a doc formatter, the Lean proof
checker and the few-shot examples map: none is on the path of an execute). Then it runs every
test of that file that is about Python or IPython against a `reward-server serve` on bwrap,
and prints which pass.

Usage: python bench/nemo_compat.py --nemo-skills /path/to/NeMo-Skills [--sandbox bwrap]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import os
import sys
import traceback
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reward_server.local import SubprocessServer  # noqa: E402

# NeMo-Skills' tests that run Python or IPython (the others need Lean, a shell, IOI data or the
# prompt library's few-shot examples)
TESTS = ["test_triple_quotes", "test_no_output", "test_execution_error", "test_syntax_error", "test_timeout_error",
         "test_std_input", "test_multiple_prints_python", "test_multiple_code_blocks_ipython",
         "test_multiple_code_blocks", "test_real_generations", "test_state_restoration"]
PARAMS = {"test_triple_quotes": ["python", "ipython", "pypy3"], "test_no_output": ["python", "ipython", "pypy3"],
          "test_execution_error": ["python", "ipython", "pypy3"], "test_syntax_error": ["python", "ipython", "pypy3"],
          "test_timeout_error": ["python", "ipython", "pypy3"], "test_std_input": ["python", "pypy3"],
          "test_multiple_prints_python": ["python", "pypy3"]}


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def load(root: Path) -> types.ModuleType:
    """NeMo-Skills' test module, with its sandbox client loaded from `root` unchanged."""
    pkg = _module("nemo_skills", __path__=[])
    _module("nemo_skills.utils", get_logger_name=lambda f: Path(f).stem, python_doc_to_cmd_help=lambda *a, **k: "")
    ce = _module("nemo_skills.code_execution", __path__=[])
    _module("nemo_skills.code_execution.proof_utils", determine_proof_status=lambda output: "n/a")
    _module("nemo_skills.prompt", __path__=[])
    _module("nemo_skills.prompt.few_shot_examples", examples_map={})
    pkg.code_execution = ce
    spec = importlib.util.spec_from_file_location("nemo_skills.code_execution.utils",
                                                  root / "nemo_skills/code_execution/utils.py")
    utils = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = utils
    spec.loader.exec_module(utils)
    for name in ("extract_code_output", "extract_code_to_execute", "format_code_output"):
        setattr(ce, name, getattr(utils, name))
    spec = importlib.util.spec_from_file_location("nemo_skills.code_execution.sandbox",
                                                  root / "nemo_skills/code_execution/sandbox.py")
    sandbox = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sandbox
    spec.loader.exec_module(sandbox)
    spec = importlib.util.spec_from_file_location("nemo_test_code_execution", root / "tests/test_code_execution.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    return tests


async def run_all(tests: types.ModuleType) -> list[tuple[str, str]]:
    out = []
    for name in TESTS:
        fn = getattr(tests, name)
        fn = inspect.unwrap(fn)
        for arg in PARAMS.get(name, [None]):
            label = f"{name}[{arg}]" if arg else name
            try:
                await (fn(arg) if arg else fn())
                out.append((label, "passed"))
            except Exception as e:  # a failed assertion: say what differed
                msg = "".join(traceback.format_exception_only(type(e), e)).strip().replace("\n", " ")
                out.append((label, f"FAILED: {msg[:300]}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nemo-skills", type=Path, required=True, help="a NeMo-Skills checkout")
    ap.add_argument("--sandbox", default="bwrap")
    args = ap.parse_args()
    srv = SubprocessServer.start(["--sandbox", args.sandbox], timeout_s=180)
    try:
        host, port = srv.url.removeprefix("http://").split(":")
        os.environ["NEMO_SKILLS_SANDBOX_HOST"], os.environ["NEMO_SKILLS_SANDBOX_PORT"] = host, port
        results = asyncio.run(run_all(load(args.nemo_skills)))
    finally:
        srv.stop()
    for label, verdict in results:
        print(f"| {label} | {verdict} |")
    passed = sum(v == "passed" for _, v in results)
    print(f"\n{passed} passed, {len(results) - passed} failed")


if __name__ == "__main__":
    main()

"""Host memory of this process: resident set now and this step's peak, and handing freed heap
memory back to the OS.

Why the trim: PyTorch's CPU tensors come from glibc malloc. Activation tensors of a few MB to
tens of MB fall under glibc's *dynamic* mmap threshold once a larger block has been freed, so
they are carved from the heap, and the heap keeps their pages after ``free``: a 135M model's
demo process held 7-8 GB resident between steps with ~1 GB live (measured, docs/TRAINER.md).
``malloc_trim(0)`` returns every whole free page to the OS. Linux/glibc only; a no-op elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys

_libc = None
_libc_tried = False


def _glibc():
    global _libc, _libc_tried
    if not _libc_tried:
        _libc_tried = True
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _libc = lib if hasattr(lib, "malloc_trim") else None  # musl and others lack it
            except OSError:
                _libc = None
    return _libc


def trim_heap() -> bool:
    """Give free heap pages back to the OS (glibc ``malloc_trim(0)``); False where unavailable."""
    lib = _glibc()
    if lib is None:
        return False
    lib.malloc_trim(0)
    return True


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return None


def rss_mb() -> float | None:
    """Resident set size now, MB (Linux)."""
    return _status_mb("VmRSS")


def reset_peak_rss() -> bool:
    """Restart the peak-RSS counter (Linux ``/proc/self/clear_refs`` 5), so ``peak_rss_mb``
    reports the peak since this call; False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def max_rss_mb() -> float:
    """The kernel's peak resident set of this process (getrusage), MB."""
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru / 2**20 if sys.platform == "darwin" else ru / 1024  # bytes on macOS, KiB on Linux


def peak_rss_mb() -> float:
    """Peak resident set since the last ``reset_peak_rss`` (Linux), else since process start."""
    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else max_rss_mb()

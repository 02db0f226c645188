"""Honest programs for the conformance suite: each must behave in the sandbox exactly as under
`python3 prog.py` in a fresh directory (stdout, exit status, and where it says so stderr).

Each entry: (id, program, stdin, compare_stderr). stderr is compared (after the program's
path is normalised) only where it shows nothing but the program's own frames; elsewhere the
interpreter's library paths differ between hosts.
"""

from __future__ import annotations

LINES = "3\n1 2 3\nalpha beta\n"

PROGRAMS: list[tuple[str, str, str, bool]] = [
    ("exit_bare", "print('a')\nexit()\nprint('never')\n", "", True),
    ("exit_code", "print('a')\nexit(3)\n", "", True),
    ("quit_message", "quit('bye now')\n", "", True),
    ("sys_exit_text", "import sys\nprint('x')\nsys.exit('fatal: no input')\n", "", True),
    ("sys_exit_bool", "import sys\nsys.exit(True)\n", "", True),
    ("sys_exit_wraps", "raise SystemExit(256 + 7)\n", "", True),
    ("sys_exit_negative", "import sys\nsys.exit(-1)\n", "", True),
    ("site_builtins",
     "for name in ('exit', 'quit', 'help', 'copyright', 'credits', 'license'):\n"
     "    obj = __builtins__.__dict__[name] if hasattr(__builtins__, '__dict__') else __builtins__[name]\n"
     "    print(name, type(obj).__name__, callable(obj))\n"
     "print(repr(exit))\n", "", True),
    ("dunder_file",
     "import os\nprint(os.path.basename(__file__), os.path.isabs(__file__))\n"
     "print(os.path.dirname(__file__) == os.getcwd())\n"
     "print(open(__file__).read().splitlines()[0])\n", "", True),
    ("dunder_main",
     "def main():\n    print('main ran', __name__)\n\nif __name__ == '__main__':\n    main()\n"
     "import sys\nprint(sys.modules['__main__'].__dict__ is globals(), __spec__, __package__, __cached__)\n",
     "", True),
    ("argv", "import sys\nprint(len(sys.argv), sys.argv[0] == __file__, sys.argv[1:])\n", "", True),
    ("sys_path_flags",
     "import os, sys\nprint(sys.path[0] == os.path.dirname(__file__))\n"
     "print(sys.flags.isolated, sys.flags.no_site, sys.flags.ignore_environment, sys.flags.safe_path,"
     " sys.flags.no_user_site, sys.flags.dont_write_bytecode, sys.dont_write_bytecode)\n", "", True),
    ("import_sibling_module",
     "with open('helper_mod.py', 'w') as f:\n    f.write('VALUE = 41\\n')\n"
     "import helper_mod\nprint(helper_mod.VALUE + 1)\n", "", True),
    ("mp_pool",
     "import multiprocessing as mp\n\ndef sq(x):\n    return x * x\n\n"
     "if __name__ == '__main__':\n    with mp.Pool(2) as p:\n        print(p.map(sq, range(10)))\n"
     "        print(sorted(p.imap_unordered(sq, range(5))))\n", "", True),
    ("mp_process_queue",
     "from multiprocessing import Process, Queue\n\ndef work(q, n):\n    q.put(sum(range(n)))\n\n"
     "if __name__ == '__main__':\n    q = Queue()\n    ps = [Process(target=work, args=(q, n)) for n in (10, 100)]\n"
     "    for p in ps: p.start()\n    print(sorted(q.get() for _ in ps))\n    for p in ps: p.join()\n"
     "    print([p.exitcode for p in ps])\n", "", True),
    ("mp_shared_memory",
     "from multiprocessing import shared_memory, Value, Array, Lock\n"
     "shm = shared_memory.SharedMemory(create=True, size=64)\nshm.buf[:3] = b'abc'\n"
     "print(bytes(shm.buf[:3]))\nshm.close()\nshm.unlink()\n"
     "v = Value('i', 5)\na = Array('d', [1.0, 2.0])\nwith Lock():\n    v.value += 1\nprint(v.value, list(a))\n",
     "", True),
    ("threads",
     "import threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
     "with ThreadPoolExecutor(4) as ex:\n    print(sum(ex.map(lambda x: x * 2, range(100))))\n"
     "lock = threading.Lock()\ncount = [0]\n"
     "def bump():\n    for _ in range(1000):\n        with lock:\n            count[0] += 1\n"
     "ts = [threading.Thread(target=bump) for _ in range(4)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n"
     "print(count[0])\n", "", True),
    ("thread_outlives_main",
     "import threading, time\n"
     "def late():\n    time.sleep(0.2)\n    print('thread done', flush=True)\n"
     "threading.Thread(target=late).start()\nprint('main done')\n", "", True),
    ("recursion_within_default",
     "import sys\nprint(sys.getrecursionlimit())\n"
     "def depth(n):\n    try:\n        return depth(n + 1)\n    except RecursionError:\n        return n\n"
     "print(depth(1))\n"
     "def down(n):\n    return 0 if n == 0 else 1 + down(n - 1)\nprint(down(990))\n", "", True),
    ("recursion_error_uncaught",
     "def f(n):\n    return f(n + 1)\nf(0)\n", "", True),
    ("recursion_raised_limit_thread",
     "import sys, threading\nsys.setrecursionlimit(1 << 20)\nthreading.stack_size(256 << 20)\n"
     "def down(n):\n    return 0 if n == 0 else 1 + down(n - 1)\nout = []\n"
     "t = threading.Thread(target=lambda: out.append(down(100000)))\nt.start()\nt.join()\n"
     "print(out, sys.getrecursionlimit())\n", "", True),
    ("traceback_nested",
     "def inner(x):\n    return 10 // x\n\ndef outer():\n    return inner(0)\n\nprint('before')\nouter()\n",
     "", True),
    ("traceback_chained",
     "try:\n    {}['missing']\nexcept KeyError:\n    raise ValueError('while handling')\n", "", True),
    ("traceback_custom_excepthook",
     "import sys\nsys.excepthook = lambda t, v, tb: print('hook', t.__name__, v, file=sys.stderr)\n"
     "raise RuntimeError('x')\n", "", True),
    ("keyboard_interrupt_self",
     "import os, signal\nprint('sending', flush=True)\nos.kill(os.getpid(), signal.SIGINT)\nimport time\n"
     "time.sleep(1)\n", "", False),
    ("signal_handler_self",
     "import os, signal\ngot = []\nsignal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n"
     "os.kill(os.getpid(), signal.SIGUSR1)\nprint('got', got == [signal.SIGUSR1])\n"
     "signal.signal(signal.SIGALRM, lambda s, f: print('alarm'))\nsignal.setitimer(signal.ITIMER_REAL, 0.05)\n"
     "import time\ntime.sleep(0.3)\nprint(signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN)\n", "", True),
    ("sigterm_self", "import os, signal\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\n",
     "", True),
    ("unicode_io",
     "import sys\ns = sys.stdin.read()\nprint(s.upper(), len(s))\nprint('h\\u00e9llo \\u2713 \\u65e5\\u672c \\U0001f600')\n"
     "print(sys.stdout.encoding, sys.stdin.encoding)\n",
     "gr\u00fc\u00dfe \u4e16\u754c\n", True),
    ("large_output",
     "import sys\nw = sys.stdout.write\nfor i in range(200000):\n    w(f'{i} {i * i}\\n')\n", "", True),
    ("print_no_flush_no_newline",
     "import sys\nsys.stdout.write('x' * 10000)\nprint('tail', end='')\n", "", True),
    ("stdin_read_split", "import sys\ndata = sys.stdin.read().split()\nprint(data)\n", LINES, True),
    ("stdin_input_until_eof",
     "lines = []\nwhile True:\n    try:\n        lines.append(input())\n    except EOFError:\n        break\n"
     "print(lines)\n", LINES, True),
    ("stdin_input_prompt", "n = int(input('n? '))\nprint(list(map(int, input().split()))[:n])\n", LINES, True),
    ("stdin_iterate", "import sys\nfor line in sys.stdin:\n    print(repr(line))\n", LINES, True),
    ("stdin_buffer",
     "import sys\nfirst = sys.stdin.buffer.readline()\nrest = sys.stdin.buffer.read()\nprint(first, rest)\n"
     "print(type(sys.stdin.buffer).__name__, sys.stdin.buffer.raw.name, sys.stdin.name)\n", LINES, True),
    ("stdin_open_fd0", "print(open(0).read().split())\n", LINES, True),
    ("stdin_open_by_name",
     "import sys\nprint(open('/dev/stdin').read().split())\nprint(open('/proc/self/fd/1', 'w').write('by name\\n'))\n"
     "sys.stdout.flush()\n", LINES, True),
    ("stdin_os_read",
     "import os\nchunks = []\nwhile True:\n    b = os.read(0, 5)\n    if not b:\n        break\n"
     "    chunks.append(b)\nprint(b''.join(chunks))\n", LINES, True),
    ("stdin_readline_mixed",
     "import sys\ninput = sys.stdin.readline\nn = int(input())\nprint(n, input().split(), sys.stdin.readlines())\n",
     LINES, True),
    ("stdin_fast_io_trick",
     "import io, os, sys\ninput = io.BytesIO(os.read(0, 1 << 20)).readline\nprint(int(input()) + 1)\n",
     LINES, True),
    ("atexit_normal",
     "import atexit\natexit.register(print, 'second registered, runs first')\n"
     "atexit.register(lambda: print('first registered, runs last'))\n", "", True),
    ("atexit_after_sys_exit",
     "import atexit, sys\natexit.register(lambda: print('cleanup'))\nprint('work')\nsys.exit(2)\n", "", True),
    ("atexit_after_exception",
     "import atexit\natexit.register(lambda: print('cleanup'))\nraise ValueError('bad')\n", "", True),
    ("pid_cwd",
     "import os\nprint(os.getpid() == os.getpid(), os.getppid() > 0, os.getcwd() == os.path.dirname(__file__))\n"
     "print(os.access(os.getcwd(), os.W_OK))\n", "", True),
    ("tempfile_use",
     "import os, tempfile\nwith tempfile.NamedTemporaryFile('w+', delete=True) as f:\n"
     "    f.write('hello')\n    f.seek(0)\n    print(f.read())\n"
     "d = tempfile.mkdtemp()\nopen(os.path.join(d, 'x'), 'w').write('y')\nprint(os.listdir(d))\n"
     "with tempfile.TemporaryDirectory() as t:\n    print(os.path.isdir(t))\n", "", True),
    ("files_in_cwd",
     "import os\nwith open('out.txt', 'w') as f:\n    f.write('line1\\nline2\\n')\n"
     "print(open('out.txt').read().splitlines())\nprint(sorted(os.listdir('.')))\nos.remove('out.txt')\n"
     "print(os.path.exists('out.txt'))\n", "", True),
    ("unclosed_file_then_read_back",
     "f = open('data.txt', 'w')\nf.write('kept')\nf.flush()\nprint(open('data.txt').read())\n", "", True),
    ("del_at_exit",
     "class Noisy:\n    def __del__(self):\n        print('released at exit')\n\nkeep = Noisy()\nprint('end of main')\n",
     "", True),
    ("subprocess_python",
     "import subprocess, sys\nr = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True)\n"
     "print(r.returncode, r.stdout.strip())\n", "", True),
    ("stderr_and_stdout",
     "import sys\nprint('out1')\nprint('err1', file=sys.stderr)\nprint('out2')\nsys.stderr.write('err2\\n')\n",
     "", True),
    ("numbers_and_big_ints",
     "import math, sys\nprint(2 ** 200, math.factorial(30), sys.maxsize, sys.int_info.default_max_str_digits)\n"
     "print(str(10 ** 4000)[:5])\n", "", True),
]

"""Interactive problems written here (no third-party code): interactors in Python and C++ on testlib's
protocol (`interactor <input> <output>`, exit 0 OK, 1 WA, 3 FAIL), with cases and programs of each kind
(correct, wrong, over the query budget, deadlocking, crashing) and the status each kind earns per test.

Every interactor reads its input file, talks on stdin/stdout (flushing each line), writes a line to its
output file (testlib's tout) and exits with its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# ---------------------------------------------------------------- interactors
# guess the number: the program learns "n q", asks "? y", hears "<" (hidden < y), ">" or "=",
# answers "! y"; at most q questions
GUESS_PY = r'''
import sys
n, x, q = map(int, open(sys.argv[1]).read().split())
out = open(sys.argv[2], "w")
print(n, q, flush=True)
asked = 0
while True:
    line = sys.stdin.readline()
    if not line:
        print("unexpected end of the program's output", file=sys.stderr); sys.exit(1)
    parts = line.split()
    if len(parts) != 2 or parts[0] not in "?!" or not parts[1].lstrip("-").isdigit():
        print("bad line", line[:40], file=sys.stderr); sys.exit(1)
    y = int(parts[1])
    if parts[0] == "!":
        if y != x:
            print("wrong guess", y, file=sys.stderr); sys.exit(1)
        out.write(f"{asked}\n"); out.close()
        print("ok found", x, "in", asked, file=sys.stderr); sys.exit(0)
    asked += 1
    if asked > q:
        print("too many questions", file=sys.stderr); sys.exit(1)
    print("<" if x < y else ">" if x > y else "=", flush=True)
'''

GUESS_CPP = r'''
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
    long long n, x, q;
    FILE* in = fopen(argv[1], "r");
    if (!in || fscanf(in, "%lld %lld %lld", &n, &x, &q) != 3) return 3;
    FILE* out = fopen(argv[2], "w");
    printf("%lld %lld\n", n, q); fflush(stdout);
    long long asked = 0;
    char op[8]; long long y;
    while (true) {
        if (scanf("%7s %lld", op, &y) != 2) { fprintf(stderr, "unexpected end\n"); return 1; }
        if (!strcmp(op, "!")) {
            if (y != x) { fprintf(stderr, "wrong guess %lld\n", y); return 1; }
            fprintf(out, "%lld\n", asked); fclose(out);
            fprintf(stderr, "ok\n"); return 0;
        }
        if (strcmp(op, "?")) { fprintf(stderr, "bad op\n"); return 1; }
        if (++asked > q) { fprintf(stderr, "too many questions\n"); return 1; }
        puts(x < y ? "<" : x > y ? ">" : "="); fflush(stdout);
    }
}
'''

# first bad version: "n q", "? i" -> 1 when i >= k else 0, "! k"
FIRST_BAD_PY = r'''
import sys
n, k, q = map(int, open(sys.argv[1]).read().split())
print(n, q, flush=True)
asked = 0
for line in sys.stdin:
    op, _, rest = line.strip().partition(" ")
    if not rest.isdigit():
        sys.stderr.write("bad line\n"); sys.exit(1)
    i = int(rest)
    if op == "!":
        if i == k:
            open(sys.argv[2], "w").write(f"{asked}\n"); sys.exit(0)
        sys.stderr.write(f"wrong answer {i}\n"); sys.exit(1)
    asked += 1
    if asked > q:
        sys.stderr.write("too many queries\n"); sys.exit(1)
    print(1 if i >= k else 0, flush=True)
sys.stderr.write("no answer\n"); sys.exit(1)
'''

# adaptive guess: no hidden number; the interactor keeps the interval consistent with its answers
# and answers so that the larger part stays; "=" only once the interval is that one number
ADAPTIVE_GUESS_CPP = r'''
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
    long long n, q;
    FILE* in = fopen(argv[1], "r");
    if (!in || fscanf(in, "%lld %lld", &n, &q) != 2) return 3;
    long long lo = 1, hi = n, asked = 0;
    printf("%lld %lld\n", n, q); fflush(stdout);
    char op[8]; long long y;
    while (scanf("%7s %lld", op, &y) == 2) {
        if (!strcmp(op, "!")) {
            if (lo == hi && y == lo) { FILE* out = fopen(argv[2], "w"); fprintf(out, "%lld\n", asked); fclose(out); return 0; }
            fprintf(stderr, "not determined or wrong: [%lld, %lld] vs %lld\n", lo, hi, y); return 1;
        }
        if (++asked > q) { fprintf(stderr, "too many questions\n"); return 1; }
        if (lo == hi && y == lo) { puts("="); }
        else if (y <= lo) { puts(">"); if (y == lo) lo = y + 1; }
        else if (y >= hi) { puts("<"); if (y == hi) hi = y - 1; }
        else if (y - lo >= hi - y) { puts("<"); hi = y - 1; }
        else { puts(">"); lo = y + 1; }
        fflush(stdout);
    }
    fprintf(stderr, "unexpected end\n"); return 1;
}
'''

# adaptive first bad version: the threshold moves with the answers (kept in (lo, hi])
ADAPTIVE_FIRST_BAD_PY = r'''
import sys
n, q = map(int, open(sys.argv[1]).read().split())
lo, hi = 0, n  # the first bad one is in (lo, hi]
print(n, q, flush=True)
asked = 0
while True:
    line = sys.stdin.readline()
    if not line:
        sys.stderr.write("unexpected end\n"); sys.exit(1)
    op, _, rest = line.strip().partition(" ")
    i = int(rest) if rest.isdigit() else -1
    if op == "!":
        if hi - lo == 1 and i == hi:
            open(sys.argv[2], "w").write(f"{asked}\n"); sys.exit(0)
        sys.stderr.write(f"not determined or wrong: ({lo}, {hi}] vs {i}\n"); sys.exit(1)
    asked += 1
    if asked > q or not 1 <= i <= n:
        sys.stderr.write("too many queries or out of range\n"); sys.exit(1)
    if i <= lo:
        ans = 0
    elif i >= hi:
        ans = 1
    else:
        ans = 1 if i - lo > hi - i else 0  # keep the larger side possible
    if ans:
        hi = i
    else:
        lo = i
    print(ans, flush=True)
'''

# pair sums: hidden a[1..n]; "? i j" (i != j) -> a_i + a_j; "! a_1 ... a_n"; at most n questions
PAIR_SUMS_PY = r'''
import sys
data = open(sys.argv[1]).read().split()
n, a = int(data[0]), list(map(int, data[1:]))
print(n, flush=True)
asked = 0
while True:
    parts = sys.stdin.readline().split()
    if not parts:
        sys.stderr.write("unexpected end\n"); sys.exit(1)
    if parts[0] == "!":
        if list(map(int, parts[1:])) == a:
            open(sys.argv[2], "w").write(f"{asked}\n"); sys.exit(0)
        sys.stderr.write("wrong array\n"); sys.exit(1)
    i, j = int(parts[1]), int(parts[2])
    asked += 1
    if asked > n or i == j or not (1 <= i <= n and 1 <= j <= n):
        sys.stderr.write("too many or bad questions\n"); sys.exit(1)
    print(a[i - 1] + a[j - 1], flush=True)
'''

# min and max: hidden a[1..n]; "? i j" -> "<", "=" or ">"; "! imin imax"; ceil(3n/2) - 2 comparisons
MIN_MAX_CPP = r'''
#include <cstdio>
#include <cstring>
#include <vector>
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "r");
    int n; if (fscanf(in, "%d", &n) != 1) return 3;
    std::vector<long long> a(n + 1);
    for (int i = 1; i <= n; i++) if (fscanf(in, "%lld", &a[i]) != 1) return 3;
    long long q = (3LL * n + 1) / 2 - 2; if (n == 1) q = 0;
    printf("%d\n", n); fflush(stdout);
    long long asked = 0; char op[8]; int i, j;
    while (scanf("%7s %d %d", op, &i, &j) == 3) {
        if (!strcmp(op, "!")) {
            long long mn = a[1], mx = a[1];
            for (int k = 1; k <= n; k++) { if (a[k] < mn) mn = a[k]; if (a[k] > mx) mx = a[k]; }
            if (i >= 1 && i <= n && j >= 1 && j <= n && a[i] == mn && a[j] == mx) {
                FILE* out = fopen(argv[2], "w"); fprintf(out, "%lld\n", asked); fclose(out); return 0;
            }
            fprintf(stderr, "wrong indices %d %d\n", i, j); return 1;
        }
        if (++asked > q) { fprintf(stderr, "too many comparisons\n"); return 1; }
        if (i < 1 || i > n || j < 1 || j > n) { fprintf(stderr, "index out of range\n"); return 1; }
        puts(a[i] < a[j] ? "<" : a[i] > a[j] ? ">" : "="); fflush(stdout);
    }
    fprintf(stderr, "unexpected end\n"); return 1;
}
'''

# rounds of A+B: the next pair comes only after the answer to this one (reading ahead deadlocks)
ROUNDS_CPP = r'''
#include <cstdio>
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "r");
    int t; if (fscanf(in, "%d", &t) != 1) return 3;
    printf("%d\n", t); fflush(stdout);
    for (int r = 0; r < t; r++) {
        long long a, b, s;
        if (fscanf(in, "%lld %lld", &a, &b) != 2) return 3;
        printf("%lld %lld\n", a, b); fflush(stdout);
        if (scanf("%lld", &s) != 1) { fprintf(stderr, "unexpected end in round %d\n", r); return 1; }
        if (s != a + b) { fprintf(stderr, "round %d: %lld is not %lld\n", r, s, a + b); return 1; }
    }
    long long extra;
    if (scanf("%lld", &extra) == 1) { fprintf(stderr, "more answers than rounds\n"); return 1; }
    FILE* out = fopen(argv[2], "w"); fprintf(out, "%d\n", t); fclose(out);
    return 0;
}
'''

# ---------------------------------------------------------------- programs
GUESS_OK = '''
import sys
n, q = map(int, input().split())
lo, hi = 1, n
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    r = input().strip()
    if r == "=":
        print("!", mid, flush=True); break
    if r == "<": hi = mid - 1
    else: lo = mid + 1
'''
GUESS_OK_CPP = r'''
#include <cstdio>
int main() {
    long long n, q; scanf("%lld %lld", &n, &q);
    long long lo = 1, hi = n; char r[4];
    while (true) {
        long long mid = (lo + hi) / 2;
        printf("? %lld\n", mid); fflush(stdout);
        scanf("%3s", r);
        if (r[0] == '=') { printf("! %lld\n", mid); fflush(stdout); return 0; }
        if (r[0] == '<') hi = mid - 1; else lo = mid + 1;
    }
}
'''
GUESS_OK_JS = r'''
const rl = require("readline").createInterface({input: process.stdin});
let lo = 1, hi = 0, mid = 0;
rl.on("line", (line) => {
  const t = line.trim().split(/\s+/);
  if (hi === 0) { hi = Number(t[0]); }
  else if (t[0] === "=") { console.log("! " + mid); rl.close(); return; }
  else if (t[0] === "<") { hi = mid - 1; } else { lo = mid + 1; }
  mid = Math.floor((lo + hi) / 2);
  console.log("? " + mid);
});
'''
GUESS_WRONG = '''
n, q = map(int, input().split())
print("! 1", flush=True)
'''
GUESS_WRONG_CPP = r'''
#include <cstdio>
int main() { long long n, q; scanf("%lld %lld", &n, &q); printf("! %lld\n", n + 1); fflush(stdout); }
'''
GUESS_LINEAR = '''
n, q = map(int, input().split())
for y in range(1, n + 1):
    print("?", y, flush=True)
    if input().strip() == "=":
        print("!", y, flush=True); break
'''
DEADLOCK_WAIT = '''
n, q = map(int, input().split())
extra = input()  # the interactor waits for a question: nobody writes
print("! 1", flush=True)
'''
DEADLOCK_READ_ALL = '''
import sys
data = sys.stdin.read()  # waits for the end of the input, which the interactor never sends
print(len(data))
'''
CRASH = '''
first = input()
raise ZeroDivisionError("boom: " + first)
'''
CRASH_CPP = r'''
#include <cstdio>
#include <cstdlib>
int main() { char buf[64]; fgets(buf, sizeof buf, stdin); abort(); }
'''

FIRST_BAD_OK = '''
n, q = map(int, input().split())
lo, hi = 0, n
while hi - lo > 1:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    if input().strip() == "1": hi = mid
    else: lo = mid
print("!", hi, flush=True)
'''
FIRST_BAD_WRONG = '''
n, q = map(int, input().split())
lo, hi = 0, n
while hi - lo > 1:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    if input().strip() == "1": hi = mid
    else: lo = mid
print("!", hi + 1, flush=True)
'''
FIRST_BAD_LINEAR = '''
n, q = map(int, input().split())
for i in range(1, n + 1):
    print("?", i, flush=True)
    if input().strip() == "1":
        print("!", i, flush=True); break
'''
FIRST_BAD_CRASH = '''
n, q = map(int, input().split())
print("?", n, flush=True)
print(1 // int(input().strip() == "2"))
'''

PAIR_SUMS_OK = '''
n = int(input())
def ask(i, j):
    print("?", i, j, flush=True)
    return int(input())
s12, s13, s23 = ask(1, 2), ask(1, 3), ask(2, 3)
a = [0] * (n + 1)
a[1] = (s12 + s13 - s23) // 2
a[2], a[3] = s12 - a[1], s13 - a[1]
for k in range(4, n + 1):
    a[k] = ask(1, k) - a[1]
print("!", *a[1:], flush=True)
'''
PAIR_SUMS_WRONG = '''
n = int(input())
print("!", *([0] * n), flush=True)
'''
PAIR_SUMS_OVER = '''
n = int(input())
vals = {}
for i in range(1, n + 1):
    for j in range(i + 1, n + 1):
        print("?", i, j, flush=True)
        vals[i, j] = int(input())
print("! 0", flush=True)
'''

MIN_MAX_OK = '''
n = int(input())
def less(i, j):
    print("?", i, j, flush=True)
    return input().strip() == "<"
if n == 1:
    print("! 1 1", flush=True)
else:
    start = 1 if n % 2 else 3
    if n % 2:
        mn = mx = 1
    elif less(1, 2):
        mn, mx = 1, 2
    else:
        mn, mx = 2, 1
    for i in range(start if n % 2 == 0 else 2, n, 2):
        a, b = (i, i + 1) if less(i, i + 1) else (i + 1, i)
        if less(a, mn): mn = a
        if less(mx, b): mx = b
    print("!", mn, mx, flush=True)
'''
MIN_MAX_OK_CPP = r'''
#include <cstdio>
int n;
bool less_(int i, int j) { char r[4]; printf("? %d %d\n", i, j); fflush(stdout); scanf("%3s", r); return r[0] == '<'; }
int main() {
    scanf("%d", &n);
    if (n == 1) { printf("! 1 1\n"); fflush(stdout); return 0; }
    int mn, mx, i;
    if (n % 2) { mn = mx = 1; i = 2; } else { if (less_(1, 2)) { mn = 1; mx = 2; } else { mn = 2; mx = 1; } i = 3; }
    for (; i < n; i += 2) {
        int a = i, b = i + 1; if (!less_(i, i + 1)) { a = i + 1; b = i; }
        if (less_(a, mn)) mn = a;
        if (less_(mx, b)) mx = b;
    }
    printf("! %d %d\n", mn, mx); fflush(stdout);
}
'''
MIN_MAX_WRONG = '''
n = int(input())
print("! 1 1", flush=True)
'''
MIN_MAX_NAIVE = '''
n = int(input())
def less(i, j):
    print("?", i, j, flush=True)
    return input().strip() == "<"
mn = mx = 1
for i in range(2, n + 1):
    if less(i, mn): mn = i
    if less(mx, i): mx = i
print("!", mn, mx, flush=True)
'''

ROUNDS_OK = '''
t = int(input())
for _ in range(t):
    a, b = map(int, input().split())
    print(a + b, flush=True)
'''
ROUNDS_OK_CPP = r'''
#include <cstdio>
int main() { int t; scanf("%d", &t); while (t--) { long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\n", a + b); fflush(stdout); } }
'''
ROUNDS_WRONG = '''
t = int(input())
for _ in range(t):
    a, b = map(int, input().split())
    print(a - b, flush=True)
'''
ROUNDS_EXTRA = '''
t = int(input())
for _ in range(t):
    a, b = map(int, input().split())
    print(a + b, flush=True)
    print(a + b, flush=True)
'''
ROUNDS_CRASH = '''
t = int(input())
a, b = map(int, input().split())
raise SystemExit(3)
'''


@dataclass
class Problem:
    name: str
    language: str  # the interactor's
    interactor: str
    inputs: list[str]  # each test's input (the interactor's only)
    programs: dict[str, tuple[str, str]]  # kind -> (language, source)
    expected: dict[str, str] = field(default_factory=dict)  # kind -> status of the first test

    def task(self, language: str, timeout_s: float = 2.0) -> dict:
        return {"type": "code", "language": language, "timeout_s": timeout_s,
                "tests": {"kind": "stdio", "cases": [{"stdin": s, "stdout": ""} for s in self.inputs],
                          "interactor": {"language": self.language, "source": self.interactor}}}


# what each kind earns (the first test's status; with stop_on_timeout the rest of a timed-out job is skipped)
EXPECTED = {"correct": "passed", "wrong": "failed", "over_budget": "failed", "deadlock": "timeout",
            "crash": "error"}

PROBLEMS: list[Problem] = [
    Problem("guess_py", "python", GUESS_PY, ["100 37 7", "1000 1 10", "1 1 1"],
            {"correct": ("python", GUESS_OK), "correct_cpp": ("cpp", GUESS_OK_CPP), "correct_js": ("javascript", GUESS_OK_JS),
             "wrong": ("python", GUESS_WRONG), "over_budget": ("python", GUESS_LINEAR), "deadlock": ("python", DEADLOCK_WAIT),
             "crash": ("python", CRASH)}),
    Problem("guess_cpp", "cpp", GUESS_CPP, ["100 64 7", "1000000000 999999999 30", "2 2 2"],
            {"correct": ("python", GUESS_OK), "correct_cpp": ("cpp", GUESS_OK_CPP), "wrong_cpp": ("cpp", GUESS_WRONG_CPP),
             "over_budget": ("python", GUESS_LINEAR), "deadlock": ("python", DEADLOCK_READ_ALL),
             "crash_cpp": ("cpp", CRASH_CPP)}),
    Problem("first_bad_py", "python", FIRST_BAD_PY, ["100 50 7", "1 1 0", "1000 999 10"],
            {"correct": ("python", FIRST_BAD_OK), "wrong": ("python", FIRST_BAD_WRONG),
             "over_budget": ("python", FIRST_BAD_LINEAR), "deadlock": ("python", DEADLOCK_WAIT),
             "crash": ("python", FIRST_BAD_CRASH)}),
    Problem("adaptive_guess_cpp", "cpp", ADAPTIVE_GUESS_CPP, ["100 7", "1000 10", "5 3"],
            {"correct": ("python", GUESS_OK), "correct_cpp": ("cpp", GUESS_OK_CPP), "wrong": ("python", GUESS_WRONG),
             "over_budget": ("python", GUESS_LINEAR), "deadlock": ("python", DEADLOCK_WAIT), "crash": ("python", CRASH)}),
    Problem("adaptive_first_bad_py", "python", ADAPTIVE_FIRST_BAD_PY, ["100 7", "1000 10", "2 1"],
            {"correct": ("python", FIRST_BAD_OK), "wrong": ("python", FIRST_BAD_WRONG),
             "over_budget": ("python", FIRST_BAD_LINEAR), "deadlock": ("python", DEADLOCK_READ_ALL),
             "crash": ("python", FIRST_BAD_CRASH)}),
    Problem("pair_sums_py", "python", PAIR_SUMS_PY, ["5 3 1 4 1 5", "3 -7 0 7", "6 10 20 30 40 50 60"],
            {"correct": ("python", PAIR_SUMS_OK), "wrong": ("python", PAIR_SUMS_WRONG),
             "over_budget": ("python", PAIR_SUMS_OVER), "deadlock": ("python", DEADLOCK_READ_ALL),
             "crash": ("python", CRASH)}),
    Problem("min_max_cpp", "cpp", MIN_MAX_CPP, ["6 5 1 4 1 5 9", "7 2 7 1 8 2 8 1", "1 42"],
            {"correct": ("python", MIN_MAX_OK), "correct_cpp": ("cpp", MIN_MAX_OK_CPP), "wrong": ("python", MIN_MAX_WRONG),
             "over_budget": ("python", MIN_MAX_NAIVE), "deadlock": ("python", DEADLOCK_READ_ALL), "crash": ("python", CRASH)}),
    Problem("rounds_cpp", "cpp", ROUNDS_CPP, ["3 1 2 3 4 5 6", "1 -5 5", "4 1000000000 1000000000 0 0 7 -7 1 1"],
            {"correct": ("python", ROUNDS_OK), "correct_cpp": ("cpp", ROUNDS_OK_CPP), "wrong": ("python", ROUNDS_WRONG),
             "over_budget": ("python", ROUNDS_EXTRA), "deadlock": ("python", DEADLOCK_READ_ALL),
             "crash": ("python", ROUNDS_CRASH)}),
]


def expected_status(kind: str) -> str:
    """The first test's status for a program of `kind` (a `_cpp` or `_js` suffix: the same kind in C++, JavaScript)."""
    return EXPECTED[kind.removesuffix("_cpp").removesuffix("_js")]

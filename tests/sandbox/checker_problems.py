"""Problems with many right answers, each with a checker written here (Python or C++, testlib's
protocol without testlib.h: `checker <input> <output> <answer>`, exit 0 OK, 1 WA, 2 PE, 7 points
with "points <x>" on stderr), its tests, and candidates: several correct programs whose outputs
differ, and wrong ones, each with the status every test must get. Add a problem: one entry."""

from __future__ import annotations

from dataclasses import dataclass, field

P, F = "passed", "failed"


@dataclass
class Problem:
    name: str
    checker_language: str
    checker: str
    cases: list[dict]  # {"stdin", "stdout"}: stdout is the jury's answer (one of the right ones)
    good: list[str]  # Python programs, each right on every case, outputs differing from each other
    bad: list[tuple[str, list[str]]]  # (Python program, every case's status)
    cpp: list[tuple[str, list[str]]] = field(default_factory=list)  # (C++ program, statuses)
    partial: list[tuple[str, list[float]]] = field(default_factory=list)  # (Python program, each case's score)


def case(stdin: str, stdout: str) -> dict:
    return {"stdin": stdin, "stdout": stdout}


# A Python checker's preamble: the three files as text
PY = "import sys\ninp, out, ans = (open(p).read() for p in sys.argv[1:4])\n"

PROBLEMS: list[Problem] = [
    Problem(
        "permutation", "python",
        PY + "n = int(inp)\ntry:\n    v = [int(x) for x in out.split()]\nexcept ValueError:\n    sys.exit(2)\n"
        "sys.exit(0 if sorted(v) == list(range(1, n + 1)) else 1)\n",
        [case("3\n", "1 2 3\n"), case("5\n", "1 2 3 4 5\n")],
        ["n = int(input()); print(*range(1, n + 1))", "n = int(input()); print(*range(n, 0, -1))",
         "n = int(input()); print('\\n'.join(map(str, [n] + list(range(1, n)))))"],
        [("n = int(input()); print(*range(n))", [F, F]), ("print('one two')", [F, F]),
         ("n = int(input()); print(*([1] * n))", [F, F])],
        cpp=[("#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);for(int i=n;i>=1;i--)printf(\"%d \",i);}", [P, P]),
             ("#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);for(int i=0;i<n;i++)printf(\"%d \",i);}", [F, F])],
    ),
    Problem(
        "two_sum_any_pair", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n;long long t;in>>n>>t;"
        "std::vector<long long>a(n);for(auto&x:a)in>>x;long long i,j;if(!(out>>i>>j))return 2;std::string r;if(out>>r)return 2;"
        "if(i<1||j<1||i>n||j>n||i>=j)return 1;return a[i-1]+a[j-1]==t?0:1;}",
        [case("4 5\n1 4 2 3\n", "1 2\n"), case("5 10\n5 5 3 7 1\n", "1 2\n")],
        ["n,t=map(int,input().split());a=list(map(int,input().split()))\n"
         "print(*next((i+1,j+1) for i in range(n) for j in range(i+1,n) if a[i]+a[j]==t))",
         "n,t=map(int,input().split());a=list(map(int,input().split()))\n"
         "print(*next((i+1,j+1) for j in range(n-1,-1,-1) for i in range(j-1,-1,-1) if a[i]+a[j]==t))"],
        [("print(1, 1)", [F, F]), ("print(2, 1)", [F, F]), ("print(1)", [F, F]), ("print(1, 2, 3)", [F, F])],
    ),
    Problem(
        "nontrivial_divisor", "python",
        PY + "n = int(inp)\ntry:\n    d = int(out)\nexcept ValueError:\n    sys.exit(2)\n"
        "sys.exit(0 if 1 < d < n and n % d == 0 else 1)\n",
        [case("12\n", "2\n"), case("91\n", "7\n"), case("10403\n", "101\n")],
        ["n=int(input())\nd=2\nwhile n%d: d+=1\nprint(d)", "n=int(input())\nd=2\nwhile n%d: d+=1\nprint(n//d)"],
        [("print(1)", [F, F, F]), ("n=int(input());print(n)", [F, F, F]), ("print('2x')", [F, F, F])],
    ),
    Problem(
        "subset_sum_indices", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n;long long s;in>>n>>s;"
        "std::vector<long long>a(n);for(auto&x:a)in>>x;std::set<long long>seen;long long k,sum=0;if(!(out>>k))return 2;"
        "for(long long q=0;q<k;q++){long long i;if(!(out>>i))return 2;if(i<1||i>n||seen.count(i))return 1;seen.insert(i);sum+=a[i-1];}"
        "return sum==s&&k>0?0:1;}",
        [case("5 9\n2 7 4 5 3\n", "2\n1 2\n"), case("4 6\n1 2 3 6\n", "1\n4\n")],
        ["import itertools\nn,s=map(int,input().split());a=list(map(int,input().split()))\n"
         "for r in range(1,n+1):\n    for c in itertools.combinations(range(n),r):\n        if sum(a[i] for i in c)==s:\n"
         "            print(r);print(*[i+1 for i in c]);raise SystemExit",
         "import itertools\nn,s=map(int,input().split());a=list(map(int,input().split()))\n"
         "for r in range(n,0,-1):\n    for c in itertools.combinations(range(n),r):\n        if sum(a[i] for i in c)==s:\n"
         "            print(r);print(*[i+1 for i in reversed(c)]);raise SystemExit"],
        [("print(1);print(1)", [F, F]), ("print(2);print(1, 1)", [F, F]), ("print(0)", [F, F])],
    ),
    Problem(
        "square_root_tolerance", "python",
        PY + "import math\nx = float(inp)\ntry:\n    y = float(out.strip())\nexcept ValueError:\n    sys.exit(2)\n"
        "sys.exit(0 if math.isfinite(y) and abs(y - math.sqrt(x)) <= 1e-6 * max(1.0, math.sqrt(x)) else 1)\n",
        [case("2\n", "1.4142135624\n"), case("1e10\n", "100000\n")],
        ["import math;print(math.sqrt(float(input())))", "import math;print('%.9f' % math.sqrt(float(input())))",
         "import math;x=float(input());print(f'{x ** 0.5:.8f}')"],
        [("import math;print('%.2f' % math.sqrt(float(input())))", [F, P]), ("print('nan')", [F, F]),
         ("print('1,41')", [F, F])],
    ),
    Problem(
        "distinct_values_any_order", "python",
        PY + "want = sorted(set(inp.split()[1:]))\ngot = out.split()\nsys.exit(0 if sorted(got) == want else 1)\n",
        [case("6\n3 1 3 2 1 2\n", "1 2 3\n"), case("3\n7 7 7\n", "7\n")],
        ["input();print(*sorted(set(input().split())))", "input();print(*sorted(set(input().split()), reverse=True))",
         "input();s=[];[s.append(x) for x in input().split() if x not in s];print('\\n'.join(s))"],
        [("input();print(input())", [F, F]), ("input();print(*sorted(set(input().split()))[:-1])", [F, F])],
    ),
    Problem(
        "topological_order", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n,m;in>>n>>m;"
        "std::vector<std::pair<int,int>>e(m);for(auto&p:e)in>>p.first>>p.second;std::vector<int>pos(n+1,-1);"
        "for(int i=0;i<n;i++){int x;if(!(out>>x))return 2;if(x<1||x>n||pos[x]!=-1)return 1;pos[x]=i;}std::string r;if(out>>r)return 2;"
        "for(auto&p:e)if(pos[p.first]>pos[p.second])return 1;return 0;}",
        [case("4 3\n1 2\n1 3\n3 4\n", "1 2 3 4\n"), case("3 0\n", "1 2 3\n")],
        ["import sys\nd=sys.stdin.read().split();n,m=int(d[0]),int(d[1]);ind=[0]*(n+1);g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b=int(d[2+2*i]),int(d[3+2*i]);g[a].append(b);ind[b]+=1\n"
         "q=[i for i in range(1,n+1) if not ind[i]];r=[]\nwhile q:\n    x=q.pop();r.append(x)\n"
         "    for y in g[x]:\n        ind[y]-=1\n        if not ind[y]: q.append(y)\nprint(*r)",
         "import sys\nd=sys.stdin.read().split();n,m=int(d[0]),int(d[1]);ind=[0]*(n+1);g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b=int(d[2+2*i]),int(d[3+2*i]);g[a].append(b);ind[b]+=1\n"
         "q=[i for i in range(n,0,-1) if not ind[i]];r=[]\nwhile q:\n    x=q.pop(0);r.append(x)\n"
         "    for y in g[x]:\n        ind[y]-=1\n        if not ind[y]: q.append(y)\nprint(*r)"],
        [("n=int(input().split()[0]);print(*range(n,0,-1))", [F, P]), ("print(1)", [F, F])],
    ),
    Problem(
        "bipartite_two_coloring", "python",
        PY + "d = inp.split()\nn, m = int(d[0]), int(d[1])\ncol = out.split()\n"
        "if len(col) != n or any(c not in ('1', '2') for c in col):\n    sys.exit(2)\n"
        "edges = [(int(d[2 + 2 * i]), int(d[3 + 2 * i])) for i in range(m)]\n"
        "sys.exit(0 if all(col[a - 1] != col[b - 1] for a, b in edges) else 1)\n",
        [case("4 4\n1 2\n2 3\n3 4\n4 1\n", "1 2 1 2\n"), case("3 1\n1 2\n", "1 2 1\n")],
        ["import sys\nd=sys.stdin.read().split();n,m=int(d[0]),int(d[1]);g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b=int(d[2+2*i]),int(d[3+2*i]);g[a].append(b);g[b].append(a)\n"
         "c=[0]*(n+1)\nfor s in range(1,n+1):\n    if c[s]: continue\n    c[s]=1;st=[s]\n    while st:\n        x=st.pop()\n"
         "        for y in g[x]:\n            if not c[y]: c[y]=3-c[x];st.append(y)\nprint(*c[1:])",
         "import sys\nd=sys.stdin.read().split();n,m=int(d[0]),int(d[1]);g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b=int(d[2+2*i]),int(d[3+2*i]);g[a].append(b);g[b].append(a)\n"
         "c=[0]*(n+1)\nfor s in range(n,0,-1):\n    if c[s]: continue\n    c[s]=2;st=[s]\n    while st:\n        x=st.pop()\n"
         "        for y in g[x]:\n            if not c[y]: c[y]=3-c[x];st.append(y)\nprint(*c[1:])"],
        [("n=int(input().split()[0]);print(*[1]*n)", [F, F]), ("print('1 3 1 3')", [F, F])],
    ),
    Problem(
        "any_palindrome", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n;in>>n;std::string s,r;"
        "if(!(out>>s))return 2;if(out>>r)return 2;if((int)s.size()!=n)return 1;for(char ch:s)if(ch<'a'||ch>'z')return 2;"
        "return std::string(s.rbegin(),s.rend())==s?0:1;}",
        [case("5\n", "aaaaa\n"), case("4\n", "abba\n")],
        ["print('z' * int(input()))", "n=int(input());h='abcdefghij'[:n//2];print(h+('q' if n%2 else '')+h[::-1])"],
        [("print('ab' * int(input()))", [F, F]), ("print('A' * int(input()))", [F, F])],
        cpp=[("#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);for(int i=0;i<n;i++)putchar('k');puts(\"\");}", [P, P])],
    ),
    Problem(
        "k_distinct_letters", "python",
        PY + "n, k = map(int, inp.split())\ns = out.strip()\n"
        "if not s.isascii() or not s.isalpha() or not s.islower():\n    sys.exit(2)\n"
        "sys.exit(0 if len(s) == n and len(set(s)) == k else 1)\n",
        [case("5 2\n", "aaaab\n"), case("3 3\n", "abc\n")],
        ["n,k=map(int,input().split());print(''.join(chr(97+min(i,k-1)) for i in range(n)))",
         "n,k=map(int,input().split());print(''.join(chr(97+i%k) for i in range(n)))"],
        [("n,k=map(int,input().split());print('a'*n)", [F, F]), ("print('ABC')", [F, F])],
    ),
    Problem(
        "pythagorean_triple", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);long long n,a,b,cc;in>>n;"
        "if(!(out>>a>>b>>cc))return 2;if(a<1||b<1||cc<1||a>n||b>n||cc>n)return 1;return a*a+b*b==cc*cc?0:1;}",
        [case("5\n", "3 4 5\n"), case("30\n", "5 12 13\n")],
        ["print(3, 4, 5)", "print(4, 3, 5)",
         "n=int(input())\nprint(*max((a,b,c) for c in range(1,n+1) for b in range(1,c) for a in range(1,b+1) if a*a+b*b==c*c))"],
        [("print(1, 1, 1)", [F, F]), ("print(6, 8, 10)", [F, P])],
    ),
    Problem(
        "monotone_lattice_path", "python",
        PY + "n, m = map(int, inp.split())\ns = out.strip()\nif set(s) - {'R', 'D'}:\n    sys.exit(2)\n"
        "sys.exit(0 if s.count('D') == n - 1 and s.count('R') == m - 1 else 1)\n",
        [case("3 4\n", "DDRRR\n"), case("1 1\n", "\n")],
        ["n,m=map(int,input().split());print('R'*(m-1)+'D'*(n-1))", "n,m=map(int,input().split());print('D'*(n-1)+'R'*(m-1))",
         "n,m=map(int,input().split());print(''.join('RD'[i%2] for i in range(2*min(n,m)-2))+'R'*(m-n)+'D'*(n-m))"],
        [("print('RRRR')", [F, F]), ("print('DDLR')", [F, F])],
    ),
    Problem(
        "yes_no_any_case", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]),an(v[3]);std::string o,a,r;"
        "if(!(out>>o))return 2;if(out>>r)return 2;an>>a;for(auto&ch:o)ch=tolower(ch);for(auto&ch:a)ch=tolower(ch);"
        "if(o!=\"yes\"&&o!=\"no\")return 2;return o==a?0:1;}",
        [case("4\n", "YES\n"), case("7\n", "NO\n")],
        ["print('YES' if int(input()) % 2 == 0 else 'NO')", "print('yes' if int(input()) % 2 == 0 else 'nO')"],
        [("print('YES')", [P, F]), ("print('maybe')", [F, F]), ("print('yes no')", [F, F])],
    ),
    Problem(
        "primes_partial_points", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n;in>>n;std::vector<int>pr;"
        "for(int i=2;i<=n;i++){bool p=1;for(int d=2;d*d<=i;d++)if(i%d==0)p=0;if(p)pr.push_back(i);}std::set<long long>got;long long x;"
        "while(out>>x){if(!std::binary_search(pr.begin(),pr.end(),(int)x)||got.count(x))return 1;got.insert(x);}"
        "if(got.size()==pr.size())return 0;if(got.empty())return 1;fprintf(stderr,\"points %.6f\\n\",double(got.size())/pr.size());return 7;}",
        [case("10\n", "2 3 5 7\n"), case("20\n", "2 3 5 7 11 13 17 19\n")],
        ["n=int(input());print(*[p for p in range(2,n+1) if all(p%d for d in range(2,p))])",
         "n=int(input());print(*reversed([p for p in range(2,n+1) if all(p%d for d in range(2,p))]))"],
        [("print(4)", [F, F]), ("print(2, 2)", [F, F])],
        partial=[("print(2, 3)", [0.5, 0.25]), ("n=int(input());print(*[p for p in range(2,n) if all(p%d for d in range(2,p))][:3])",
                  [0.75, 0.375])],
    ),
    Problem(
        "equal_sum_pairs", "python",
        PY + "n = int(inp)\ntry:\n    v = [int(x) for x in out.split()]\nexcept ValueError:\n    sys.exit(2)\n"
        "if len(v) != 2 * n or sorted(v) != list(range(1, 2 * n + 1)):\n    sys.exit(1)\n"
        "sums = {v[2 * i] + v[2 * i + 1] for i in range(n)}\nsys.exit(0 if len(sums) == 1 else 1)\n",
        [case("2\n", "1 4\n2 3\n"), case("3\n", "1 6\n2 5\n3 4\n")],
        ["n=int(input())\nfor i in range(1,n+1): print(i, 2*n+1-i)", "n=int(input())\nfor i in range(n,0,-1): print(2*n+1-i, i)"],
        [("n=int(input())\nfor i in range(1,2*n,2): print(i, i+1)", [F, F])],
    ),
    Problem(
        "argsort_ties_any_order", "python",
        PY + "a = list(map(int, inp.split()[1:]))\ntry:\n    p = [int(x) - 1 for x in out.split()]\nexcept ValueError:\n    sys.exit(2)\n"
        "ok = sorted(p) == list(range(len(a))) and all(a[p[i]] <= a[p[i + 1]] for i in range(len(a) - 1))\n"
        "sys.exit(0 if ok else 1)\n",
        [case("4\n3 1 3 1\n", "2 4 1 3\n"), case("3\n5 5 5\n", "1 2 3\n")],
        ["input();a=list(map(int,input().split()));print(*sorted(range(1,len(a)+1),key=lambda i:a[i-1]))",
         "input();a=list(map(int,input().split()));print(*sorted(range(1,len(a)+1),key=lambda i:(a[i-1],-i)))"],
        [("input();a=input().split();print(*range(1,len(a)+1))", [F, P]), ("print('1 1 1 1')", [F, F])],
    ),
    Problem(
        "triangle_area_tolerance", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);double x1,y1,x2,y2,x3,y3,a;"
        "in>>x1>>y1>>x2>>y2>>x3>>y3;if(!(out>>a))return 2;double e=std::fabs((x2-x1)*(y3-y1)-(x3-x1)*(y2-y1))/2;"
        "return std::isfinite(a)&&std::fabs(a-e)<=1e-6*std::max(1.0,e)?0:1;}",
        [case("0 0 1 0 0 1\n", "0.5\n"), case("0 0 3 0 0 7\n", "10.500000\n")],
        ["a=list(map(float,input().split()));print(abs((a[2]-a[0])*(a[5]-a[1])-(a[4]-a[0])*(a[3]-a[1]))/2)",
         "a=list(map(float,input().split()));print('%.10f' % (abs((a[2]-a[0])*(a[5]-a[1])-(a[4]-a[0])*(a[3]-a[1]))/2))",
         "a=list(map(float,input().split()));print('%.3e' % (abs((a[2]-a[0])*(a[5]-a[1])-(a[4]-a[0])*(a[3]-a[1]))/2+1e-9))"],
        [("print(1)", [F, F]), ("print('0.5.1')", [P, F])],
    ),
    Problem(
        "any_shortest_path", "python",
        PY + "d = list(map(int, inp.split()))\nn, m = d[0], d[1]\nw = {}\n"
        "for i in range(m):\n    a, b, c = d[2 + 3 * i: 5 + 3 * i]\n    w[(a, b)] = w[(b, a)] = min(c, w.get((a, b), c))\n"
        "def length(path):\n    if not path or path[0] != 1 or path[-1] != n:\n        return None\n"
        "    try:\n        return sum(w[(path[i], path[i + 1])] for i in range(len(path) - 1))\n    except KeyError:\n        return None\n"
        "try:\n    got = [int(x) for x in out.split()]\nexcept ValueError:\n    sys.exit(2)\n"
        "best = length([int(x) for x in ans.split()])\nif best is None:\n    sys.exit(3)\n"
        "sys.exit(0 if length(got) == best else 1)\n",
        [case("4 5\n1 2 1\n2 4 1\n1 3 1\n3 4 1\n1 4 5\n", "1 2 4\n"), case("3 2\n1 2 2\n2 3 2\n", "1 2 3\n")],
        ["import heapq,sys\nd=list(map(int,sys.stdin.read().split()));n,m=d[0],d[1];g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b,c=d[2+3*i:5+3*i];g[a].append((b,c));g[b].append((a,c))\n"
         "D=[10**18]*(n+1);P=[0]*(n+1);D[1]=0;h=[(0,1)]\nwhile h:\n    x,u=heapq.heappop(h)\n    if x>D[u]: continue\n"
         "    for v,c in g[u]:\n        if x+c<D[v]: D[v]=x+c;P[v]=u;heapq.heappush(h,(D[v],v))\n"
         "p=[n]\nwhile p[-1]!=1: p.append(P[p[-1]])\nprint(*p[::-1])",
         "import heapq,sys\nd=list(map(int,sys.stdin.read().split()));n,m=d[0],d[1];g=[[] for _ in range(n+1)]\n"
         "for i in range(m):\n    a,b,c=d[2+3*i:5+3*i];g[a].append((b,c));g[b].append((a,c))\n"
         "D=[10**18]*(n+1);P=[0]*(n+1);D[1]=0;h=[(0,1)]\nwhile h:\n    x,u=heapq.heappop(h)\n    if x>D[u]: continue\n"
         "    for v,c in reversed(g[u]):\n        if x+c<=D[v] and v!=1 and (x+c<D[v] or v!=n or u>P[v]): D[v]=x+c;P[v]=u;heapq.heappush(h,(D[v],v))\n"
         "p=[n]\nwhile p[-1]!=1: p.append(P[p[-1]])\nprint(*p[::-1])"],
        [("import sys;n=int(sys.stdin.read().split()[0]);print(1, n)", [F, F]), ("print(1, 4)", [F, F])],
    ),
    Problem(
        "any_longest_common_subsequence", "cpp",
        "#include <bits/stdc++.h>\nbool sub(const std::string&s,const std::string&t){size_t j=0;for(char ch:t)if(j<s.size()&&s[j]==ch)j++;return j==s.size();}"
        "int main(int c,char**v){std::ifstream in(v[1]),out(v[2]),an(v[3]);std::string a,b,o,w,r;in>>a>>b;an>>w;"
        "if(!(out>>o))o=\"\";if(out>>r)return 2;if(w==\"-\")w=\"\";if(o==\"-\")o=\"\";"
        "return o.size()==w.size()&&sub(o,a)&&sub(o,b)?0:1;}",
        [case("abcbdab bdcaba\n", "bcba\n"), case("xyz xzy\n", "xy\n")],
        ["a,b=input().split()\nn,m=len(a),len(b);L=[[0]*(m+1) for _ in range(n+1)]\n"
         "for i in range(n-1,-1,-1):\n    for j in range(m-1,-1,-1):\n        L[i][j]=L[i+1][j+1]+1 if a[i]==b[j] else max(L[i+1][j],L[i][j+1])\n"
         "i=j=0;s=''\nwhile i<n and j<m:\n    if a[i]==b[j]: s+=a[i];i+=1;j+=1\n    elif L[i+1][j]>=L[i][j+1]: i+=1\n    else: j+=1\nprint(s or '-')",
         "a,b=input().split()\nn,m=len(a),len(b);L=[[0]*(m+1) for _ in range(n+1)]\n"
         "for i in range(n-1,-1,-1):\n    for j in range(m-1,-1,-1):\n        L[i][j]=L[i+1][j+1]+1 if a[i]==b[j] else max(L[i+1][j],L[i][j+1])\n"
         "i=j=0;s=''\nwhile i<n and j<m:\n    if a[i]==b[j]: s+=a[i];i+=1;j+=1\n    elif L[i+1][j]>L[i][j+1]: i+=1\n    else: j+=1\nprint(s or '-')"],
        [("print('b')", [F, F]), ("print('abcd')", [F, F])],
    ),
    Problem(
        "fewest_coins", "python",
        PY + "d = list(map(int, inp.split()))\ns, coins = d[0], set(d[2:])\ntry:\n    got = [int(x) for x in out.split()]\n"
        "except ValueError:\n    sys.exit(2)\nbest = len(ans.split())\n"
        "sys.exit(0 if sum(got) == s and all(c in coins for c in got) and len(got) == best else 1)\n",
        [case("6 3\n1 3 4\n", "3 3\n"), case("10 2\n5 2\n", "5 5\n"), case("7 3\n1 3 4\n", "3 4\n")],
        ["s,k=map(int,input().split());c=list(map(int,input().split()));B=[0]+[10**9]*s;W=[0]*(s+1)\n"
         "for x in range(1,s+1):\n    for q in c:\n        if q<=x and B[x-q]+1<B[x]: B[x]=B[x-q]+1;W[x]=q\n"
         "r=[]\nwhile s: r.append(W[s]);s-=W[s]\nprint(*r)",
         "s,k=map(int,input().split());c=list(map(int,input().split()));B=[0]+[10**9]*s;W=[0]*(s+1)\n"
         "for x in range(1,s+1):\n    for q in c:\n        if q<=x and B[x-q]+1<=B[x]: B[x]=B[x-q]+1;W[x]=q\n"
         "r=[]\nwhile s: r.append(W[s]);s-=W[s]\nprint(*sorted(r, reverse=True))"],
        [("s,k=map(int,input().split());print(*[1]*s)", [F, F, F]), ("print(4, 1, 1)", [F, F, F])],
    ),
    Problem(
        "n_queens_any", "cpp",
        "#include <bits/stdc++.h>\nint main(int c,char**v){std::ifstream in(v[1]),out(v[2]);int n;in>>n;std::vector<int>q(n);"
        "for(auto&x:q){if(!(out>>x))return 2;if(x<1||x>n)return 1;}std::string r;if(out>>r)return 2;"
        "for(int i=0;i<n;i++)for(int j=i+1;j<n;j++)if(q[i]==q[j]||std::abs(q[i]-q[j])==j-i)return 1;return 0;}",
        [case("4\n", "2 4 1 3\n"), case("6\n", "2 4 6 1 3 5\n")],
        ["n=int(input())\ndef go(r,q):\n    if r==n: return q\n    for c in range(1,n+1):\n"
         "        if all(c!=x and abs(c-x)!=r-i for i,x in enumerate(q)):\n            z=go(r+1,q+[c])\n            if z: return z\nprint(*go(0,[]))",
         "n=int(input())\ndef go(r,q):\n    if r==n: return q\n    for c in range(n,0,-1):\n"
         "        if all(c!=x and abs(c-x)!=r-i for i,x in enumerate(q)):\n            z=go(r+1,q+[c])\n            if z: return z\nprint(*go(0,[]))"],
        [("n=int(input());print(*range(1,n+1))", [F, F]), ("print(2, 4, 1)", [F, F])],
    ),
    Problem(
        "distinct_sum_k_numbers", "python",
        PY + "k, m, s = map(int, inp.split())\ntry:\n    v = [int(x) for x in out.split()]\nexcept ValueError:\n    sys.exit(2)\n"
        "sys.exit(0 if len(v) == k and len(set(v)) == k and all(1 <= x <= m for x in v) and sum(v) == s else 1)\n",
        [case("3 10 12\n", "1 2 9\n"), case("2 5 9\n", "4 5\n")],
        ["k,m,s=map(int,input().split())\nv=list(range(1,k+1));r=s-sum(v);i=k-1\nwhile r:\n"
         "    t=min(r,m-(k-1-i)-v[i]);v[i]+=t;r-=t;i-=1\nprint(*v)",
         "k,m,s=map(int,input().split())\nv=list(range(m,m-k,-1));r=sum(v)-s;i=k-1\nwhile r:\n"
         "    t=min(r,v[i]-(k-i));v[i]-=t;r-=t;i-=1\nprint(*v)"],
        [("k,m,s=map(int,input().split());print(*[s//k]*k)", [F, F]), ("print(12)", [F, F])],
    ),
]

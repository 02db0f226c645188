"""One stdio problem (read a and b, print a + b) and, per language, a correct, a wrong, a
compile-error, a runtime-error, a time-limit and a memory-limit program, each with the
per-test statuses a careful judge gives on CASES (shared by the tests and bench/languages.py)."""

from __future__ import annotations

import os

TOOLCHAIN_IMAGE = os.environ.get("VERIREWARD_TOOLCHAIN_IMAGE", "verireward-sandbox:toolchains")


def host_options(kind: str) -> dict:
    """A host with the toolchains: bwrap binds the host's (languages=True), docker runs the
    toolchain image (sandbox/Dockerfile.toolchains, built by .ci/run)."""
    return {"languages": True} if kind == "bwrap" else {"image": TOOLCHAIN_IMAGE}

CASES = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 6\n", "stdout": "11\n"}, {"stdin": "0 7\n", "stdout": "7\n"}]

# the runtime error hits the case a == 0, the time limit a == 5, the memory limit a == 1
EXPECTED = {
    "correct": ["passed", "passed", "passed"],
    "wrong": ["failed", "failed", "failed"],
    "compile_error": ["compile_error"] * 3,
    "runtime_error": ["passed", "passed", "error"],
    "time_limit": ["passed", "timeout", "skipped"],  # stop_on_timeout (the default): one timeout per item
    "memory_limit": ["memory", "passed", "passed"],
}

CPP_HEAD = "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n    long long a, b;\n    cin >> a >> b;\n"

PROGRAMS: dict[str, dict[str, str]] = {
    "cpp": {
        "correct": CPP_HEAD + "    cout << a + b << endl;\n}\n",
        "wrong": CPP_HEAD + "    cout << a - b + 100 << endl;\n}\n",
        "compile_error": CPP_HEAD + "    cout << a + b << endl\n}\n",
        "runtime_error": CPP_HEAD + "    if (a == 0) { vector<int> v; return v.at(5); }\n    cout << a + b << endl;\n}\n",
        "time_limit": CPP_HEAD + "    volatile long long x = 0;\n    while (a == 5) x++;\n    cout << a + b << endl;\n}\n",
        "memory_limit": CPP_HEAD + "    vector<int> v;\n    while (a == 1) v.push_back(1);\n    cout << a + b << endl;\n}\n",
    },
    "java": {
        "correct": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
                   "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
                   "    System.out.println(a + b);\n  }\n}\n",
        "wrong": "import java.util.*;\npublic class Solution {\n  public static void main(String[] x) {\n"
                 "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
                 "    System.out.println(a * b + 100);\n  }\n}\n",
        "compile_error": "public class Main {\n  public static void main(String[] x) {\n    int a = \"no\";\n  }\n}\n",
        "runtime_error": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
                         "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
                         "    int[] t = new int[1];\n    if (a == 0) t[5] = 1;\n    System.out.println(a + b);\n  }\n}\n",
        "time_limit": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
                      "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
                      "    long k = 0;\n    while (a == 5) k++;\n    System.out.println(a + b);\n  }\n}\n",
        "memory_limit": "import java.util.*;\npublic class Main {\n  public static void main(String[] x) {\n"
                        "    Scanner s = new Scanner(System.in);\n    long a = s.nextLong(), b = s.nextLong();\n"
                        "    List<long[]> keep = new ArrayList<>();\n    while (a == 1) keep.add(new long[1 << 17]);\n"
                        "    System.out.println(a + b);\n  }\n}\n",
    },
    "go": {
        "correct": "package main\nimport \"fmt\"\nfunc main() {\n\tvar a, b int64\n\tfmt.Scan(&a, &b)\n"
                   "\tfmt.Println(a + b)\n}\n",
        "wrong": "package main\nimport \"fmt\"\nfunc main() {\n\tvar a, b int64\n\tfmt.Scan(&a, &b)\n"
                 "\tfmt.Println(a*2 + b*3)\n}\n",
        "compile_error": "package main\nimport \"fmt\"\nfunc main() {\n\tunused := 1\n\tfmt.Println(2)\n}\n",
        "runtime_error": "package main\nimport \"fmt\"\nfunc main() {\n\tvar a, b int64\n\tfmt.Scan(&a, &b)\n"
                         "\tt := []int{1}\n\tif a == 0 {\n\t\tfmt.Println(t[a+5])\n\t}\n\tfmt.Println(a + b)\n}\n",
        "time_limit": "package main\nimport \"fmt\"\nfunc main() {\n\tvar a, b int64\n\tfmt.Scan(&a, &b)\n"
                      "\tk := 0\n\tfor a == 5 {\n\t\tk++\n\t}\n\tfmt.Println(a + b + int64(k*0))\n}\n",
        "memory_limit": "package main\nimport \"fmt\"\nfunc main() {\n\tvar a, b int64\n\tfmt.Scan(&a, &b)\n"
                        "\tkeep := [][]byte{}\n\tfor a == 1 {\n\t\tc := make([]byte, 1<<20)\n\t\tc[0] = 1\n"
                        "\t\tfor i := range c {\n\t\t\tc[i] = byte(i)\n\t\t}\n\t\tkeep = append(keep, c)\n\t}\n"
                        "\tfmt.Println(a + b + int64(len(keep)*0))\n}\n",
    },
    "rust": {
        "correct": "use std::io::*;\nfn main() {\n    let mut s = String::new();\n    stdin().read_to_string(&mut s).unwrap();\n"
                   "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                   "    println!(\"{}\", v[0] + v[1]);\n}\n",
        "wrong": "use std::io::*;\nfn main() {\n    let mut s = String::new();\n    stdin().read_to_string(&mut s).unwrap();\n"
                 "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                 "    println!(\"{}\", v[0] + v[1] + 1);\n}\n",
        "compile_error": "fn main() {\n    let x: i32 = \"text\";\n    println!(\"{}\", x);\n}\n",
        "runtime_error": "use std::io::*;\nfn main() {\n    let mut s = String::new();\n    stdin().read_to_string(&mut s).unwrap();\n"
                         "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                         "    let t = vec![1usize];\n    if v[0] == 0 { println!(\"{}\", t[v[1] as usize]); }\n"
                         "    println!(\"{}\", v[0] + v[1]);\n}\n",
        "time_limit": "use std::io::*;\nfn main() {\n    let mut s = String::new();\n    stdin().read_to_string(&mut s).unwrap();\n"
                      "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                      "    let mut k: u64 = 0;\n    while v[0] == 5 { k = k.wrapping_add(1); }\n"
                      "    println!(\"{}\", v[0] + v[1] + (k as i64) * 0);\n}\n",
        "memory_limit": "use std::io::*;\nfn main() {\n    let mut s = String::new();\n    stdin().read_to_string(&mut s).unwrap();\n"
                        "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
                        "    let mut keep: Vec<Vec<u8>> = Vec::new();\n"
                        "    while v[0] == 1 { keep.push(vec![1u8; 1 << 20]); }\n"
                        "    println!(\"{}\", v[0] + v[1] + keep.len() as i64 * 0);\n}\n",
    },
    "javascript": {
        "correct": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                   "console.log(a + b);\n",
        "wrong": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                 "console.log(String(a) + String(b));\n",
        "compile_error": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                         "console.log(a + b;\n",
        "runtime_error": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                         "if (a === 0) null.boom();\nconsole.log(a + b);\n",
        "time_limit": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                      "let k = 0;\nwhile (a === 5) k++;\nconsole.log(a + b);\n",
        "memory_limit": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                        "const keep = [];\nwhile (a === 1) keep.push(new Array(1 << 20).fill(a));\nconsole.log(a + b);\n",
    },
}

FENCE = {"cpp": "cpp", "java": "java", "go": "go", "rust": "rust", "javascript": "js"}


def completion(lang: str, program: str) -> str:
    """A model's answer: some words, a python distractor fence, then the program's fence."""
    return f"Plan first.\n```python\nprint('not this one')\n```\nThe solution:\n```{FENCE[lang]}\n{program}```\n"

#!/usr/bin/env python3
"""The layout rules docs/architecture.md states, checked on the source tree.

1. Neither side includes the other: nothing in worker/ includes server/, and
   nothing in server/ includes worker/; the shared packages below both
   (common/, step/, compression/, model/, kaldi/, corpus/, proto/) include
   neither.
2. No production source (not a test, not test support) over 600 lines.
3. No function over 120 lines in server/, worker/, step/ or compression/.

The test reads the checkout its script lives in (it follows the runfile's
symlink back to the source tree), so Bazel must not cache its result: the
target is tagged "external".
"""
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
SOURCE_EXT = re.compile(r"\.(cc|h|cu|cuh|py|js|sh)$")
PRODUCTION_DIRS = ["bench", "common", "compression", "corpus", "deploy",
                   "fuzz", "kaldi", "model", "proto", "scripts", "server",
                   "shrink", "step", "worker"]
FUNCTION_DIRS = ["server", "worker", "step", "compression", "shrink"]
# Packages and the top-level directories they must not include.
FORBIDDEN_INCLUDES = {
    "worker": ["server/"],
    "server": ["worker/"],
    "common": ["server/", "worker/", "step/"],
    "step": ["server/", "worker/"],
    "compression": ["server/", "worker/"],
    "model": ["server/", "worker/"],
    "kaldi": ["server/", "worker/"],
    "corpus": ["server/", "worker/"],
    "shrink": ["server/", "worker/"],
}


def repo_root():
    here = os.path.realpath(__file__)
    return os.path.dirname(os.path.dirname(here))


def is_test_file(path):
    name = os.path.basename(path)
    return ("_test" in name or name.startswith("test_") or
            "testing" in name or name.startswith("fake_") or
            "/testdata/" in path or "/corpus/" in path and path.startswith("fuzz/"))


def sources(root, top):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        # Installed packages (npm), caches: not the project's sources.
        dirs[:] = [x for x in dirs
                   if x not in ("node_modules", "__pycache__")]
        for f in sorted(files):
            if SOURCE_EXT.search(f):
                full = os.path.join(d, f)
                yield os.path.relpath(full, root)


def strip_cpp(text):
    """Comments and string/char literals blanked, line count kept."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")
    text = re.sub(r'R"([^(]*)\((.*?)\)\1"', keep_lines, text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return text


CONTROL = re.compile(r"\b(if|for|while|switch|catch)\s*\(.*\)\s*$")
FUNCTION_HEAD = re.compile(
    r"\)\s*(const|override|final|noexcept|mutable|->\s*[\w:<>,\s*&]+|\s)*$")


def long_functions(text, limit):
    """(first line, lines) of each outermost function body over `limit`.

    A brace opens a function body when the text before it, since the last
    ';', '{' or '}', ends in a parameter list (with qualifiers) and is not a
    control statement; lambdas and nested blocks count toward the function
    they are in.
    """
    found = []
    stack = []  # (is_function, line)
    head = ""
    for number, line in enumerate(strip_cpp(text).split("\n"), 1):
        for ch in line:
            if ch == "{":
                is_function = (bool(FUNCTION_HEAD.search(head.rstrip())) and
                               not CONTROL.search(head.strip()) and
                               not any(f for f, _ in stack))
                stack.append((is_function, number))
                head = ""
            elif ch == "}":
                if stack:
                    is_function, start = stack.pop()
                    if is_function and number - start + 1 > limit:
                        found.append((start, number - start + 1))
                head = ""
            elif ch == ";":
                head = ""
            else:
                head += ch
        head += " "
    return found


def self_check():
    """The function scan finds a long function, and only that."""
    body = "  x += 1;\n" * 130
    long_fn = "int F(int x) const {\n" + body + "  return x;\n}\n"
    short_methods = ("class C {\n" +
                     "  int G() { return 1; }\n" * 130 + "};\n")
    control = "void H() {\n  if (a) {\n" + body + "  }\n}\n"
    assert [n for _, n in long_functions(long_fn, 120)] == [133], "long"
    assert long_functions(short_methods, 120) == [], "class body"
    assert [n for _, n in long_functions(control, 120)] == [134], "nested"
    assert long_functions("// f() {\n" + body, 120) == [], "comment"


def main():
    self_check()
    root = repo_root()
    problems = []
    checked_files = 0
    for top in PRODUCTION_DIRS:
        for path in sources(root, top):
            if is_test_file(path):
                continue
            checked_files += 1
            with open(os.path.join(root, path), errors="replace") as f:
                text = f.read()
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                problems.append(f"{path}: {lines} lines (at most "
                                f"{MAX_FILE_LINES})")
            if not re.search(r"\.(cc|h|cu|cuh)$", path):
                continue
            if top in FUNCTION_DIRS:
                for start, n in long_functions(text, MAX_FUNCTION_LINES):
                    problems.append(f"{path}:{start}: a function of {n} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    for top, banned in FORBIDDEN_INCLUDES.items():
        for path in sources(root, top):
            if not re.search(r"\.(cc|h|cu|cuh)$", path):
                continue
            with open(os.path.join(root, path), errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if m and any(m.group(1).startswith(b) for b in banned):
                        problems.append(f"{path}:{number}: {top}/ includes "
                                        f"{m.group(1)}")
    if checked_files < 100:
        problems.append(f"only {checked_files} production files found under "
                        f"{root}: not the source tree?")
    for p in problems:
        print(p)
    print(f"layout: {checked_files} production files checked, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

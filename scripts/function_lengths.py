#!/usr/bin/env python3
"""Function and file lengths of C++ sources: the house style's "a function does one step"
(past ~80 lines, name the steps) and "files small enough to read in one sitting".

  scripts/function_lengths.py [--max-function N] [--max-file N] [--max-command N] PATH...

Prints every function definition longer than --max-function lines (signature to closing
brace, lambdas and local classes counted with the function that holds them), every file
longer than --max-file lines and every cli/cmd_*.cpp longer than --max-command lines, one
per line as FILE:LINE: what; exits 1 when it printed any. PATHs are files or folders
(searched for .cpp, .hpp, .h, .cu). A light lexer, not a compiler: comments, strings,
character literals and preprocessor lines are blanked first, then each '{' is classified
by the text before it.
"""
import argparse
import os
import re
import sys

SOURCE = (".cpp", ".hpp", ".h", ".cu", ".cc")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*$")
AGGREGATE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")


def blank(text):
    """Comments, string and character literals and preprocessor lines as spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if m:
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # 1'000 is a digit separator
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " " * (j - i))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def is_function_head(head):
    """Whether the text before a '{' ends a function's signature."""
    head = head.strip()
    if not head or CONTROL.search(head) or AGGREGATE.search(head):
        return False
    if head.endswith("=") or head.endswith(",") or head.endswith("(") or head.endswith("return"):
        return False  # an initialiser or an argument
    if re.search(r"\]\s*(\([^()]*\))?\s*(mutable|constexpr|noexcept|->[^{]*)*\s*$", head):
        return False  # a lambda: counted with what holds it
    # ") const", ") override", ") -> T", ") : member_(x)", ") noexcept"
    return re.search(r"\)\s*(const|override|final|noexcept|volatile|&|&&|\s|->[\w:<>,\s*&]+)*$", head) is not None or \
        re.search(r"\)\s*:\s*[\w:]+\s*[({].*$", head, re.S) is not None


def functions(path):
    """(first line, last line, name) of every function definition of a file."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # per open brace: (is_function, start line, name)
    last = 0    # where the current statement's text starts
    line = 1
    depth_in_function = 0
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            if not depth_in_function:
                last = i + 1
        elif c == "{":
            head = text[last:i]
            func = depth_in_function == 0 and is_function_head(head)
            if func:
                stripped = head.lstrip()
                start = line - head.count("\n") + (len(head) - len(stripped) and head[:len(head) - len(stripped)].count("\n"))
                m = re.search(r"([~\w:]+(?:<[^<>]*>)?)\s*\([^)]*", stripped)
                name = re.sub(r"\s+", " ", m.group(1)) if m else stripped[:40]
                stack.append((True, start, name))
                depth_in_function += 1
            elif depth_in_function:
                stack.append((False, 0, ""))
                depth_in_function += 1
            else:
                stack.append((False, 0, ""))
            last = i + 1
        elif c == "}":
            if stack:
                func, start, name = stack.pop()
                if depth_in_function:
                    depth_in_function -= 1
                if func:
                    found.append((start, line, name))
            if not depth_in_function:
                last = i + 1
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith(SOURCE):
                        yield os.path.join(root, f)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=500)
    ap.add_argument("--max-command", type=int, default=100, help="lines of a cli/cmd_*.cpp")
    ap.add_argument("--list", action="store_true", help="print every function with its length")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    problems = 0
    for path in sources(a.paths):
        lines = open(path, encoding="utf-8", errors="replace").read().count("\n")
        if lines > a.max_file:
            print(f"{path}:1: file of {lines} lines (over {a.max_file})")
            problems += 1
        base = os.path.basename(path)
        if base.startswith("cmd_") and base.endswith(".cpp") and lines > a.max_command:
            print(f"{path}:1: command of {lines} lines (over {a.max_command})")
            problems += 1
        for start, end, name in functions(path):
            n = end - start + 1
            if a.list:
                print(f"{path}:{start}: {name} {n}")
            elif n > a.max_function:
                print(f"{path}:{start}: {name}: {n} lines (over {a.max_function})")
                problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

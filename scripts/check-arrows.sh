#!/usr/bin/env bash
# Arrows point down (docs/architecture.md, "Floors"): reads the imports of every crate's
# non-test code and fails, one line per offence, on
#   1. an import circle between files (a module with its own direct children aside), except
#      the broker's known circle (every file of it under node/src/broker/);
#   2. an arrow from the ground floor (node/src/{io,store,ha,namesrv,acl}/, config.rs,
#      config/, limits.rs) up to broker, controller, net, shard, metrics or sim.
# An arrow is a `crate::` / `super::` / `self::` path in a `use` tree or inline in the code,
# resolved to the longest module file that exists. Left out: tests.rs, tests_*.rs, tests/,
# benches/, examples/, fuzz/, src/bin/ (crates of their own), everything from a file's first
# `#[cfg(test)]` on, comments and string literals. A `mod` declaration says where a file
# sits in the tree; it is not an arrow.
#
# Usage: scripts/check-arrows.sh [REPO]   (default: this repository). Exit 0: no offence;
# 1: offences (one line each); 2: nothing to read.
set -euo pipefail
repo="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
exec python3 - "$repo" <<'PY'
import os
import re
import sys

# The broker's own circle: the floors refactor (docs/architecture.md, "Floors") removes it.
# Until then a circle whose files all lie under this folder is allowed; one that takes in any
# file outside it is not.
KNOWN_CIRCLE_DIR = "node/src/broker/"
GROUND = ("node/src/io/", "node/src/store/", "node/src/ha/", "node/src/namesrv/",
          "node/src/acl/", "node/src/config/", "node/src/config.rs", "node/src/limits.rs")
UPPER = ("broker", "controller", "net", "shard", "metrics", "sim")  # node's top-level modules
SKIP_DIRS = {"tests", "benches", "examples", "fuzz"}  # and src/bin/


def crate_files(src):
    """Module path (tuple) -> file, for one crate's src/."""
    out = {}
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIP_DIRS and not (rel_root == "." and d == "bin"))
        for f in sorted(files):
            if not f.endswith(".rs") or f == "tests.rs" or re.fullmatch(r"tests_\w+\.rs", f):
                continue
            parts = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            out[tuple(parts)] = os.path.join(root, f)
    return out


def code_only(text):
    """The text up to the first #[cfg(test)], with comments, strings and char literals
    blanked (newlines kept, so line numbers hold)."""
    cut = text.find("#[cfg(test)]")
    if cut >= 0:
        text = text[:cut]
    out, i, n = [], 0, len(text)
    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j])); i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j): depth += 1; j += 2
                elif text.startswith("*/", j): depth -= 1; j += 2
                else: j += 1
            out.append(blank(text[i:j])); i = j
        elif re.match(r'b?r#*"', text[i:i + 8]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(b?r)(#*)"', text[i:])
            end = text.find('"' + m.group(2), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(2))
            out.append(blank(text[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1])); i = j + 1
        elif c == "'" and re.match(r"'(\\[^']{1,10}|[^\\'\n])'", text[i:i + 13]):
            m = re.match(r"'(\\[^']{1,10}|[^\\'\n])'", text[i:i + 13])
            out.append(blank(m.group(0))); i += len(m.group(0))
        else:
            out.append(c); i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]]."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    def rec(prefix, t):
        if t.startswith("{") and t.endswith("}"):
            parts, depth, cur = [], 0, ""
            for ch in t[1:-1]:
                if ch == "," and depth == 0:
                    parts.append(cur); cur = ""
                    continue
                depth += ch == "{"; depth -= ch == "}"; cur += ch
            parts.append(cur)
            return [p for part in parts if part for p in rec(prefix, part)]
        if "::{" in t:
            head, rest = t.split("::{", 1)
            return rec(prefix + head.split("::"), "{" + rest)
        return [prefix + t.split("::")]
    return rec([], tree)


def resolve(mod, path, files):
    if path[0] == "crate":
        base, path = [], path[1:]
    else:
        base = list(mod)
        while path and path[0] in ("super", "self"):
            if path[0] == "super" and base:
                base = base[:-1]
            path = path[1:]
    full = base + [p for p in path if p and p not in ("*", "self")]
    for k in range(len(full), 0, -1):
        if tuple(full[:k]) in files:
            return tuple(full[:k])
    return None


def arrows(files):
    """{from: {to: first line}} between the crate's files."""
    g = {m: {} for m in files}
    for mod, path in files.items():
        with open(path, encoding="utf-8", errors="replace") as f:
            code = code_only(f.read())
        found = []
        for m in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]+);", code):
            found += [(m.start(), p) for p in expand_use(m.group(1))]
        for m in re.finditer(r"(?<![\w])\$?((?:crate|super|self)(?:::\w+)+)", code):
            found.append((m.start(), m.group(1).split("::")))
        for at, p in found:
            t = resolve(mod, p, files)
            if t is not None and t != mod and t not in g[mod]:
                g[mod][t] = code.count("\n", 0, at) + 1
    return g


def circles(nodes, g):
    """Strongly connected components of more than one file (iterative Tarjan)."""
    index, low, on, stack, out, count = {}, {}, set(), [], [], 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = count; count += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = count; count += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def parent_and_children(comp):
    return any(all(o == m or (len(o) == len(m) + 1 and o[:len(m)] == m) for o in comp)
               for m in comp)


def main():
    repo = sys.argv[1]
    if not os.path.isdir(repo):
        print(f"check-arrows: {repo} is not a folder")
        return 2
    offences, crates, file_count = [], 0, 0
    for crate in sorted(os.listdir(repo)):
        src = os.path.join(repo, crate, "src")
        if not (os.path.isfile(os.path.join(repo, crate, "Cargo.toml")) and os.path.isdir(src)):
            continue
        crates += 1
        files = crate_files(src)
        file_count += len(files)
        rel = {m: os.path.relpath(p, repo).replace(os.sep, "/") for m, p in files.items()}
        g = arrows(files)
        for comp in circles(sorted(files), g):
            names = sorted(rel[m] for m in comp)
            if parent_and_children(comp) or all(n.startswith(KNOWN_CIRCLE_DIR) for n in names):
                continue
            # Named: the files outside the known circle's folder, and the arrows that touch them.
            outside = {m for m in comp if not rel[m].startswith(KNOWN_CIRCLE_DIR)}
            shown = sorted(rel[m] for m in outside)
            held = len(names) - len(shown)
            inner = sorted(f"{rel[a]}:{g[a][b]} -> {rel[b]}" for a in comp for b in g[a]
                           if b in comp and (a in outside or b in outside))
            also = f" and {held} under {KNOWN_CIRCLE_DIR}" if held else ""
            offences.append(f"circle of {len(names)} files: {', '.join(shown)}{also} "
                            f"(arrows: {'; '.join(inner)})")
        if crate != "node":
            continue
        for a in sorted(g):
            if not rel[a].startswith(GROUND):
                continue
            for b, line in sorted(g[a].items()):
                if b[0] in UPPER:
                    offences.append(f"{rel[a]}:{line} -> {rel[b]}: the ground floor points up "
                                    f"to {b[0]}")
    if crates == 0 or file_count == 0:
        print(f"check-arrows: no crate with a src/ folder under {repo}")
        return 2
    for o in offences:
        print(f"check-arrows: {o}")
    if offences:
        return 1
    print(f"check-arrows: {file_count} files of {crates} crates, no circle outside "
          f"{KNOWN_CIRCLE_DIR} and no arrow up from the ground floor")
    return 0


sys.exit(main())
PY

#!/usr/bin/env bash
# Arrows point down (docs/architecture.md, "Floors"): reads the imports of every crate's
# non-test code and fails, one line per offence, on
#   1. an import circle between files (a module with its own direct children aside);
#   2. an arrow from the ground floor (node/src/{io,store,ha,namesrv,acl}/, config.rs,
#      config/, limits.rs) up to broker, controller, net, shard, metrics or sim;
#   3. in the broker (node/src/broker/): an arrow from the shard core (broker/mod.rs, its
#      shared tables, broker/shard/) to a feature or the top floor, or from a feature (any
#      other child of broker/, a file or a folder) to another feature or the top floor
#      (broker/dispatch.rs, broker/node.rs).
# An arrow is a `crate::` / `super::` / `self::` path in a `use` tree or inline in the code,
# resolved to the longest module file that exists; for rule 3 also a path that starts with
# the name of a child module the file declares (`role::RoleState` in broker/mod.rs). Left out: tests.rs, tests_*.rs, tests/,
# benches/, examples/, fuzz/, src/bin/ (crates of their own), everything from a file's first
# `#[cfg(test)]` on, comments and string literals. A `mod` declaration says where a file
# sits in the tree; it is not an arrow.
#
# Usage: scripts/check-arrows.sh [REPO]   (default: this repository). Exit 0: no offence;
# 1: offences (one line each); 2: nothing to read.
# scripts/check-arrows.sh --self-test: plants each kind of offence in a copy of this
# repository's node/src and fails unless every one is found.
set -euo pipefail
if [ "${1:-}" = "--self-test" ]; then
    here="$(cd "$(dirname "$0")/.." && pwd)"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # plant FILES LINE EXPECTED: a copy of node/ with LINE put first in each of FILES must
    # fail with EXPECTED among the offences (first: before any `#[cfg(test)]`).
    plant() {
        rm -rf "$tmp/node"
        mkdir -p "$tmp/node"
        cp -r "$here/node/src" "$here/node/Cargo.toml" "$tmp/node/"
        local f
        for f in $1; do
            { printf '%s\n' "$2"; cat "$here/node/src/$f"; } >"$tmp/node/src/$f"
        done
        local out
        if out="$("$0" "$tmp")"; then
            echo "check-arrows self-test: planted '$2' in $1 and nothing was found"
            exit 1
        fi
        if ! grep -q -- "$3" <<<"$out"; then
            echo "check-arrows self-test: planted '$2' in $1; expected '$3' in: $out"
            exit 1
        fi
    }
    plant broker/shard/ack.rs "use crate::broker::pop::PopRoom;" "the shard core points up to the feature pop"
    plant broker/mod.rs "use txn::TxnRoom;" "the shard core points up to the feature txn"
    plant broker/shard/run.rs "use crate::broker::node::HOOKS;" "the shard core points up to the top floor"
    plant broker/pop/revive.rs "use crate::broker::retry::send_back;" "the feature pop points to another feature (retry)"
    plant broker/clients.rs "use crate::broker::dispatch::dispatch;" "the feature clients points to the top floor"
    plant store/mod.rs "use crate::broker::Broker;" "the ground floor points up to broker"
    plant "store/recall.rs store/schedule.rs" "use crate::store::{recall, schedule};" "circle of"
    echo "check-arrows self-test: every planted arrow was found"
    exit 0
fi
repo="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
exec python3 - "$repo" <<'PY'
import os
import re
import sys

# The broker's floors: the shard core at the bottom, one room per feature above it, the
# router and the list of rooms on top.
BROKER = "broker"
CORE = {("broker",), ("broker", "groups"), ("broker", "topics"), ("broker", "offsets"),
        ("broker", "locks"), ("broker", "live"), ("broker", "group_config"),
        ("broker", "role"), ("broker", "shard")}
TOP = {("broker", "dispatch"), ("broker", "node")}
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


def child_path(path, children):
    """`child::x` (a child module the file declares) -> `self::child::x`."""
    return ["self"] + path if path and path[0] in children else path


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


def arrows(files, child_paths):
    """{from: {to: first line}} between the crate's files. With `child_paths`, a path that
    starts with a child module the file declares is an arrow too (for the broker's floors;
    circles leave them out: a parent re-exporting its children is not a circle)."""
    g = {m: {} for m in files}
    for mod, path in files.items():
        with open(path, encoding="utf-8", errors="replace") as f:
            code = code_only(f.read())
        found = []
        # Child modules this file declares: `child::x` paths are arrows too.
        children = (re.findall(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code)
                    if child_paths else [])
        heads = ["crate", "super", "self"] + children
        head = "|".join(heads)
        for m in re.finditer(r"\buse\s+((?:" + head + r")::[^;]+);", code):
            found += [(m.start(), child_path(p, children)) for p in expand_use(m.group(1))]
        for m in re.finditer(r"(?<![\w:])\$?((?:" + head + r")(?:::\w+)+)", code):
            found.append((m.start(), child_path(m.group(1).split("::"), children)))
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


def broker_room(m):
    """'core', 'top', a feature's name, or None outside the broker."""
    if not m or m[0] != BROKER:
        return None
    if m[:2] in TOP:
        return "top"
    if m[:1] in CORE and len(m) == 1 or m[:2] in CORE:
        return "core"
    return m[1]


def broker_floor_offence(a, b):
    ra, rb = broker_room(a), broker_room(b)
    if ra is None or rb is None or ra == rb or rb == "core" or ra == "top":
        return None
    if ra == "core":
        what = "the top floor" if rb == "top" else f"the feature {rb}"
        return f"the shard core points up to {what}"
    what = "the top floor" if rb == "top" else f"another feature ({rb})"
    return f"the feature {ra} points to {what}"


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
        g = arrows(files, False)
        for comp in circles(sorted(files), g):
            names = sorted(rel[m] for m in comp)
            if parent_and_children(comp):
                continue
            inner = sorted(f"{rel[a]}:{g[a][b]} -> {rel[b]}" for a in comp for b in g[a]
                           if b in comp)
            offences.append(f"circle of {len(names)} files: {', '.join(names)} "
                            f"(arrows: {'; '.join(inner)})")
        if crate != "node":
            continue
        floors = arrows(files, True)
        for a in sorted(floors):
            for b, line in sorted(floors[a].items()):
                why = broker_floor_offence(a, b)
                if why:
                    offences.append(f"{rel[a]}:{line} -> {rel[b]}: {why}")
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
    print(f"check-arrows: {file_count} files of {crates} crates: no circle, no arrow up "
          f"from the ground floor, the broker's core or a feature")
    return 0


sys.exit(main())
PY

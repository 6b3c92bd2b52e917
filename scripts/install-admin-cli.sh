#!/usr/bin/env bash
# Installs the Rust port's mqadmin, `rocketmq-admin-cli` 1.0.0 (crates.io), for
# interop/tests/admin_cli.rs, into a folder of its own:
#   ${RINGMQ_ADMIN_CLI_ROOT:-$HOME/.cache/ringmq/admin-cli}/bin/rocketmq-admin-cli
#
# The released source, built with one feature dropped. rocketmq-admin-cli asks its library
# rocketmq-admin-core for the features "client-adapter" and "rocksdb-export"; the second
# builds RocksDB from C++ (over 13 minutes on a 2-core machine) for the commands that read
# a RocksDB metadata folder offline (exportMetadataInRocksDB and the like), which the
# library compiles only under `#[cfg(feature = "rocksdb-export")]`. Without it those
# commands exit with an error; every other command is the released code.
#
# Steps: cargo fetches the released crates (checked against crates.io's checksums); the
# .crate of rocketmq-admin-cli 1.0.0 is unpacked, its sha256 checked against the one cargo
# locked, the one word "rocksdb-export" removed from its manifest's feature list (checked:
# exactly one line changes), and `cargo install --path --locked` builds it with the
# Cargo.lock it was released with (versions unchanged; only the RocksDB entries fall out).
#
# Skips when the installed binary carries this script's stamp. Exits non-zero with one line
# saying why when it could not install.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=1.0.0
STAMP="rocketmq-admin-cli $VERSION without rocksdb-export, dev profile (scripts/install-admin-cli.sh v2)"
ROOT="${RINGMQ_ADMIN_CLI_ROOT:-$HOME/.cache/ringmq/admin-cli}"
BIN="$ROOT/bin/rocketmq-admin-cli"

if [ -x "$BIN" ] && [ "$(cat "$ROOT/STAMP" 2>/dev/null)" = "$STAMP" ]; then
    echo "rocketmq-admin-cli $VERSION is installed: $BIN"
    exit 0
fi

die() {
    echo "install-admin-cli: $*" >&2
    exit 1
}

START=$(date +%s)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ringmq-admin-cli.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# 1. The released crates, through cargo: a throwaway package that depends on the tool.
mkdir -p "$WORK/fetch/src"
cat >"$WORK/fetch/Cargo.toml" <<EOF
[package]
name = "fetch-rocketmq-admin-cli"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rocketmq-admin-cli = "=$VERSION"
EOF
: >"$WORK/fetch/src/lib.rs"
cargo fetch --quiet --manifest-path "$WORK/fetch/Cargo.toml" \
    --target "$(rustc -vV | sed -n 's/^host: //p')" ||
    die "cargo fetch rocketmq-admin-cli $VERSION failed"

CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
CRATE="$(ls "$CARGO_HOME"/registry/cache/*/rocketmq-admin-cli-$VERSION.crate 2>/dev/null | head -n 1)"
[ -n "$CRATE" ] || die "rocketmq-admin-cli-$VERSION.crate is not in $CARGO_HOME/registry/cache"
WANT="$(python3 - "$WORK/fetch/Cargo.lock" "$VERSION" <<'EOF'
import sys, tomllib
lock = tomllib.load(open(sys.argv[1], "rb"))
for p in lock["package"]:
    if p["name"] == "rocketmq-admin-cli" and p["version"] == sys.argv[2]:
        print(p["checksum"])
EOF
)"
HAVE="$(sha256sum "$CRATE" | cut -d' ' -f1)"
[ -n "$WANT" ] && [ "$WANT" = "$HAVE" ] ||
    die "$CRATE has sha256 $HAVE, crates.io says '$WANT'"

# 2. Unpack it and drop the one feature.
mkdir -p "$WORK/src"
tar -xzf "$CRATE" -C "$WORK/src"
PKG="$WORK/src/rocketmq-admin-cli-$VERSION"
python3 - "$PKG/Cargo.toml" <<'EOF' || die "could not drop rocksdb-export from the manifest"
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
# The feature list of [dependencies.rocketmq-admin-core], and only there.
start = lines.index("[dependencies.rocketmq-admin-core]")
end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("["))
hits = [i for i in range(start, end) if lines[i].strip() == '"rocksdb-export",']
if len(hits) != 1:
    sys.exit("expected one rocksdb-export line, found %d" % len(hits))
del lines[hits[0]]
open(path, "w").write("\n".join(lines))
EOF
grep -q '"client-adapter"' "$PKG/Cargo.toml" || die "client-adapter is gone from the manifest"
if grep -q 'rocksdb-export' "$PKG/Cargo.toml"; then die "rocksdb-export is still in the manifest"; fi

# 3. Build and install the released code with the Cargo.lock it was released with: cargo
# metadata prunes what the dropped feature no longer needs (other versions stay as
# locked), then `cargo install --locked` builds exactly that. The dev profile (no debug info):
# the same code, compiled in about a third of the release profile's CPU time (5.5 against
# 18.7 CPU minutes on the 2-core test machine); the tests need its answers, not its speed.
cp "$PKG/Cargo.lock" "$WORK/Cargo.lock.released"
cargo metadata --quiet --format-version 1 --manifest-path "$PKG/Cargo.toml" >/dev/null ||
    die "cargo could not read the unpacked manifest"
python3 - "$WORK/Cargo.lock.released" "$PKG/Cargo.lock" <<'EOF' || die "the lock changed beyond dropping RocksDB"
import sys, tomllib
def pkgs(path):
    return {(p["name"], p["version"]) for p in tomllib.load(open(path, "rb"))["package"]}
released, now = pkgs(sys.argv[1]), pkgs(sys.argv[2])
added = now - released
if added:
    sys.exit("new in the lock: %s" % sorted(added))
dropped = sorted(n for n, _ in released - now)
print("dropped from the released lock:", " ".join(dropped))
EOF
mkdir -p "$ROOT"
rm -f "$ROOT/STAMP"
CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug --path "$PKG" --root "$ROOT" \
    --target-dir "$WORK/target" --force ||
    die "cargo install of the unpacked rocketmq-admin-cli $VERSION failed"
if grep -q '"librocksdb-sys"\|name = "rocksdb"' "$PKG/Cargo.lock"; then
    die "the build still locked RocksDB"
fi
"$BIN" --version >/dev/null || die "$BIN does not run"
echo "$STAMP" >"$ROOT/STAMP"
echo "installed rocketmq-admin-cli $VERSION (without rocksdb-export) in $(($(date +%s) - START)) s: $BIN"

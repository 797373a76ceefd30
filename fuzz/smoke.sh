#!/usr/bin/env bash
# Fuzz smoke test (CI's last step; developers run it too): builds the cargo-fuzz targets and
# runs each one for FUZZ_SECONDS (default 30) on its committed seed corpus, two at a time (the
# fuzzers are single-threaded), then replays the reproducers in fuzz/artifacts-found/.
# Fails on any crash, panic, hang (> 10 s per input) or allocation over 2 GiB, leaving the
# input in fuzz/artifacts/<target>/ with the command that replays it.
#
#   bash fuzz/smoke.sh                  # all targets, 30 s each
#   FUZZ_SECONDS=600 bash fuzz/smoke.sh index gmeta   # a longer run of some targets
#   FUZZ_FEATURES= bash fuzz/smoke.sh jpeg reframe video_segment  # zune-jpeg and rav1d instead
set -euo pipefail
cd "$(dirname "$0")"

SECONDS_EACH="${FUZZ_SECONDS:-30}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(index gmeta chunk jpeg reframe video_segment manifest)

# The decoders the targets drive: libjpeg-turbo and libdav1d, what the wheels ship, when cmake,
# meson, ninja and nasm are there to build them (CI installs them), else zune-jpeg and rav1d.
# FUZZ_FEATURES overrides it (FUZZ_FEATURES= for zune-jpeg and rav1d; each choice is a build).
if [ -z "${FUZZ_FEATURES+set}" ]; then
    if command -v cmake >/dev/null && command -v nasm >/dev/null && command -v meson >/dev/null \
        && command -v ninja >/dev/null; then
        FUZZ_FEATURES=turbo,dav1d
    else
        FUZZ_FEATURES=
    fi
fi
features=()
[ -n "$FUZZ_FEATURES" ] && features=(--features "$FUZZ_FEATURES")
# libdav1d and rav1d (the default) both define dav1d's C API: one of them per build.
[[ ",$FUZZ_FEATURES," == *,dav1d,* ]] && features=(--no-default-features "${features[@]}")

# dav1d's build options for libdav1d-sys (build_backend/dav1d-meson/meson says why).
PATH="$(cd .. && pwd)/build_backend/dav1d-meson:$PATH"
export PATH

# cargo-fuzz passes nightly-only flags (-Zsanitizer=address, sanitizer coverage); the stable
# toolchain accepts them with RUSTC_BOOTSTRAP=1, so no nightly toolchain is needed.
export RUSTC_BOOTSTRAP=1

# libfuzzer-sys compiles libFuzzer's C++ sources: without a C++ compiler the build fails deep
# in a build script, so say it first.
if ! command -v "${CXX:-c++}" >/dev/null && ! command -v g++ >/dev/null \
    && ! command -v clang++ >/dev/null; then
    echo "fuzz/smoke.sh: cargo-fuzz needs a C++ compiler (g++ or clang++; apt-get install g++)" >&2
    exit 1
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GULPIO_FUZZ_TMP="$work" # the chunk target's scratch files

start=$(date +%s)
echo "== fuzz: format and build (decoder: $([ -n "$FUZZ_FEATURES" ] && echo "features $FUZZ_FEATURES" || echo "zune-jpeg, rav1d"))"
cargo fmt --check
# 16 codegen units: the build is most of this script's time; the fuzzers lose a few % speed.
# -O: debug assertions, overflow checks and each crate's optimisation come from
# fuzz/Cargo.toml's profile (see there), so one build serves every target.
if ! cargo fuzz build "${features[@]}" -O --codegen-units 16 >"$work/build.log" 2>&1; then
    cat "$work/build.log"
    exit 1
fi
bin=target/x86_64-unknown-linux-gnu/release
echo "   built in $(($(date +%s) - start)) s"

run() {
    local t=$1
    local extra=()
    [ "$t" = chunk ] && extra=(-max_len=8192)
    mkdir -p "$work/corpus-$t" "$work/artifacts-$t"
    if "$bin/$t" "$work/corpus-$t" "corpus/$t" -max_total_time="$SECONDS_EACH" \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts-$t/" "${extra[@]}" >"$work/$t.log" 2>&1; then
        local runs cov
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
        cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/$t.log" | tail -1)
        echo "   $t: ok, $runs runs in ${SECONDS_EACH} s, $cov"
    else
        mkdir -p "artifacts/$t"
        cp "$work/artifacts-$t/"* "artifacts/$t/" 2>/dev/null || true
        echo "   $t: FAILED; last lines of its log:"
        tail -40 "$work/$t.log" | sed 's/^/     /'
        for a in "artifacts/$t"/*; do
            [ -e "$a" ] && echo "   replay: RUSTC_BOOTSTRAP=1 cargo fuzz run -O ${features[*]} $t fuzz/$a"
        done
        return 1
    fi
}

echo "== fuzz: ${SECONDS_EACH} s per target"
failed=0
for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
    pids=()
    for t in "${TARGETS[@]:i:2}"; do
        run "$t" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || failed=1
    done
done

echo "== fuzz: replaying fuzz/artifacts-found/"
for t in "${TARGETS[@]}"; do
    found=(artifacts-found/"$t"-*)
    [ -e "${found[0]}" ] || continue
    if ! "$bin/$t" -runs=1 -rss_limit_mb=2048 -timeout=10 "${found[@]}" >"$work/replay-$t.log" 2>&1; then
        echo "   $t: a recorded reproducer fails again"
        tail -20 "$work/replay-$t.log" | sed 's/^/     /'
        failed=1
    else
        echo "   $t: ${#found[@]} reproducer(s) pass"
    fi
done

echo "== fuzz: done in $(($(date +%s) - start)) s"
exit "$failed"

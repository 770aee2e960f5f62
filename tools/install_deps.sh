#!/usr/bin/env bash
# Installs every Debian package troupe's build, tests and demo need, then the npm packages of the
# dashboard's browser test (tests/dashboard, see the block at the end).
#
# Idempotent: when every package is already installed it returns in well under a second without
# touching apt or npm. Must run as root (it calls apt-get); says so clearly otherwise.
#
# Usage: tools/install_deps.sh [--check]   (--check: only report what is missing, exit 1 if any)
set -euo pipefail

PACKAGES=(
  # Build system and toolchain.
  bazel-bootstrap g++ make git clang-format
  # Libraries troupe links against.
  libcaf-dev libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libtorch-dev libgloo-dev libgtest-dev libgmock-dev nlohmann-json3-dev libyaml-cpp-dev
  libcli11-dev libspdlog-dev libcpp-httplib-dev libsqlite3-dev
  # Regex engine of tokenizer.json pre-tokenizers, NFC normalisation, gzip'd datasets.
  libonig-dev libicu-dev zlib1g-dev
  # Computer algebra of the math reward's answer verifier (reward/math).
  libginac-dev libcln-dev
  # Without the pthread OpenBLAS, LibTorch falls back to the reference BLAS and runs ~8x slower.
  libopenblas0-pthread
  # curl for the dashboard's end-to-end test; promtool (from prometheus) checks /metrics.
  curl prometheus
  # Headless browser of the dashboard test (tests/dashboard), driven by playwright-core from npm.
  chromium
  # The chat-template tests compare troupe's Jinja renderer with Python's, byte for byte.
  python3 python3-jinja2
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # dpkg-query is fast (no apt cache load); "install ok installed" means fully configured.
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

# (The npm block at the end runs whether or not Debian packages were missing.)
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ "${1:-}" == "--check" ]]; then
    echo "install_deps: missing Debian packages: ${missing[*]}" >&2
    exit 1
  fi

  if [[ $(id -u) -ne 0 ]]; then
    echo "install_deps: these Debian packages are missing: ${missing[*]}" >&2
    echo "install_deps: run 'sudo tools/install_deps.sh' (apt-get needs root), then retry." >&2
    exit 1
  fi

  echo "install_deps: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  start=$(date +%s)
  # Refresh the package lists only when an install fails for want of them (saves ~10 s otherwise).
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  echo "install_deps: done in $(( $(date +%s) - start )) s"
fi

# -------------------------------------------------------------------------------------------------
# npm packages of the dashboard's browser test: tests/dashboard/node_modules (playwright-core,
# pinned by tests/dashboard/package-lock.json). `npm ci` runs only when node_modules is missing or
# was installed from another package-lock.json (a stamp in node_modules records the lock's
# sha256), so the usual run costs one sha256sum. No browser is downloaded: the test drives Debian's
# chromium (in PACKAGES above). Needs Node.js >= 20 with npm (the machine's nodejs package).
dashboard_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/dashboard"
if [[ -f "$dashboard_dir/package-lock.json" ]]; then
  lock_stamp="$dashboard_dir/node_modules/.troupe-package-lock.sha256"
  lock_sum=$(sha256sum "$dashboard_dir/package-lock.json" | cut -d' ' -f1)
  if [[ "$(cat "$lock_stamp" 2>/dev/null || true)" != "$lock_sum" ]]; then
    if [[ "${1:-}" == "--check" ]]; then
      echo "install_deps: tests/dashboard/node_modules is missing or out of date (npm ci)" >&2
      exit 1
    fi
    if ! command -v npm >/dev/null; then
      # Everything else still builds and runs; only the browser test will report what is missing.
      echo "install_deps: WARNING: npm is not on PATH; tests/dashboard needs Node.js >= 20 with npm" >&2
    else
      echo "install_deps: npm ci in tests/dashboard (package-lock.json changed or never installed)"
      (cd "$dashboard_dir" &&
        PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
      echo "$lock_sum" > "$lock_stamp"
    fi
  fi
fi

#!/usr/bin/env bash
# Installs every Debian package troupe's build, tests and demo need.
#
# Idempotent: when every package is already installed it returns in well under a second without
# touching apt. Must run as root (it calls apt-get); says so clearly otherwise.
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
  # Without the pthread OpenBLAS, LibTorch falls back to the reference BLAS and runs ~8x slower.
  libopenblas0-pthread
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # dpkg-query is fast (no apt cache load); "install ok installed" means fully configured.
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

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

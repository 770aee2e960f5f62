#!/usr/bin/env bash
# Fails (exit 1) listing every tracked C++/CUDA file that clang-format (the repo's .clang-format,
# Google base) would change. With --fix, reformats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (run tools/install_deps.sh)" >&2
  exit 1
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp' | sort -u)
[[ ${#files[@]} -eq 0 ]] && exit 0

if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i --style=file "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check_format: ${#bad[@]} file(s) are not clang-formatted (fix: make format):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files clean"

#!/usr/bin/env bash
# The inner loop (`make quick`): gofmt, go vet and `go test -short` of the
# Go packages changed since the base branch (committed, staged, unstaged or
# new), or of the packages given. Seconds to a minute where `make test`
# takes several; run `make test` before you push.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${QUICK_BASE:-main}"
pkgs="${QUICK_PKGS:-}"
if [ -z "$pkgs" ]; then
  # A clone of a branch has origin/main but no local main.
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    if git rev-parse -q --verify "origin/$base^{commit}" >/dev/null; then
      base="origin/$base"
    else
      echo "quick: no branch $base (nor origin/$base) to compare with: set QUICK_BASE, or name packages with QUICK_PKGS" >&2
      exit 1
    fi
  fi
  pkgs=$({ git diff --name-only "$base"...; git diff --name-only HEAD; git ls-files --others --exclude-standard; } |
    { grep '\.go$' || true; } | { grep -v '^infra/' || true; } | xargs -r -n1 dirname | sort -u |
    while read -r d; do if [ -d "$d" ] && ls "$d"/*.go >/dev/null 2>&1; then echo "./$d"; fi; done | tr '\n' ' ')
fi
if [ -z "${pkgs// /}" ]; then
  echo "quick: no Go package changed since $base; name some: make quick QUICK_PKGS='./shared/star ./cmd/strand'"
  exit 0
fi
echo "== quick: $pkgs"
dirs=$(for p in $pkgs; do echo "${p%/...}"; done)
out=$(gofmt -l $dirs)
if [ -n "$out" ]; then echo "gofmt needed:"; echo "$out"; exit 1; fi
go vet $pkgs
go test -short -count=1 $pkgs

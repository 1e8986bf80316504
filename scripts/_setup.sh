# Shared set-up for scripts/test and scripts/test-slow (sourced, not run).
#   EXTRAS: pip extras to install (default "test"); the engine adapters' extras (mjx, brax,
#   and zoo, the gymnasium models their tests check; mjx, brax:
#   MuJoCo MJX and Brax, pinned in pyproject.toml) are always added, so their tests run
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

source scripts/_venv.sh
ensure_venv .venv -e ".[${EXTRAS:-test},mjx,brax,zoo]"

install_chromium() {
  # Debian's chromium, for the browser tests (Playwright drives it; no browser download)
  if ! command -v chromium >/dev/null 2>&1; then
    local SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
}

# Sourced by scripts/test; do not run it.
# Installs what the dashboard's browser test (tests/tests/dashboard_browser.rs) needs: Debian's
# chromium and Node.js when missing, and the pinned playwright-core in tests/browser.

ensure_browser_test_deps() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages for the browser test: ${missing[*]}" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  (cd tests/browser && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
}

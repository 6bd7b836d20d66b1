# Sourced by scripts/test; do not run it.
# Installs what the tests against the real Laravel (tests/tests/laravel_interop.rs) need:
# Debian's php-cli, php-redis and php-laravel-framework (Laravel 8.83), when missing.

ensure_laravel_test_deps() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  local missing=()
  command -v php >/dev/null 2>&1 || missing+=(php-cli)
  { command -v php >/dev/null 2>&1 && php -m | grep -qx redis; } || missing+=(php-redis)
  [ -f /usr/share/php/Illuminate/autoload.php ] || missing+=(php-laravel-framework)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages for the Laravel tests: ${missing[*]}" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

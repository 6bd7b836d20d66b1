# Shared by scripts/test; source it, do not run it.
# Installs PostgreSQL from Debian when its server programs are missing. The tests start
# private clusters of their own (tests/src/postgres_server.rs), so nothing is started here.

postgres_installed() {
  if [ -n "${PG_BIN:-}" ]; then
    [ -x "$PG_BIN/initdb" ]
    return
  fi
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1
}

ensure_postgres() {
  if postgres_installed; then
    return
  fi
  echo "PostgreSQL is missing; installing the Debian package postgresql" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

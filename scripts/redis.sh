# Shared by scripts/demo and scripts/test; source it, do not run it.
# Installs redis-server from Debian when it is missing, and starts a private one on a free
# loopback port when REDIS_URL is unset, stopping it when the calling script exits.

ensure_redis_server() {
  ensure_debian_package redis-server redis-server
}

# Installs Debian's redis-sentinel when it is missing: the failover tests run a primary,
# replicas and sentinels of their own.
ensure_redis_sentinel() {
  ensure_debian_package redis-sentinel redis-sentinel
}

# ensure_debian_package COMMAND PACKAGE: installs PACKAGE when COMMAND is missing.
ensure_debian_package() {
  if command -v "$1" >/dev/null 2>&1; then
    return
  fi
  echo "$1 is missing; installing the Debian package $2" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

start_private_redis() {
  if [ -n "${REDIS_URL:-}" ]; then
    echo "using REDIS_URL=$REDIS_URL" >&2
    return
  fi
  local dir port pid
  dir=$(mktemp -d)
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 40000))
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/redis.log" &
    pid=$!
    for _ in $(seq 1 100); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then
        export REDIS_URL="redis://127.0.0.1:$port"
        PRIVATE_REDIS_PID=$pid
        PRIVATE_REDIS_DIR=$dir
        trap stop_private_redis EXIT
        echo "started a private redis-server on 127.0.0.1:$port" >&2
        return
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "could not start redis-server on a free port; see $dir/redis.log" >&2
  return 1
}

stop_private_redis() {
  if [ -n "${PRIVATE_REDIS_PID:-}" ]; then
    kill "$PRIVATE_REDIS_PID" 2>/dev/null || true
    wait "$PRIVATE_REDIS_PID" 2>/dev/null || true
    rm -rf "$PRIVATE_REDIS_DIR"
  fi
}

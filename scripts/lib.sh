# Shared by scripts/loadtest.sh, scripts/scale.sh, scripts/proxy-soak.sh
# and scripts/race-demo.sh (sourced, not run): reading wrk's output,
# per-process CPU time, medians, an nginx set up like keepalive-server
# (one worker, no access log, `Hello, World!`), and nginx as a proxy in
# front of it.
#
# Usage: source scripts/lib.sh   (from the repository's root)

# Run rather than sourced (as with --help): what it is, and nothing else.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  awk '!/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"
  exit 0
fi

# CPU nanoseconds used so far by every thread of a process.
cpu_ns() {
  local total=0 f
  for f in /proc/"$1"/task/*/schedstat; do
    total=$((total + $(cut -d' ' -f1 "$f")))
  done
  echo "$total"
}

# Context switches so far, voluntary and not, of every thread of a process.
ctx_switches() {
  cat /proc/"$1"/task/*/status | awk '/^(non)?voluntary_ctxt_switches/ { n += $2 } END { print n }'
}

# Latency as printed by wrk (e.g. 1.23ms, 850.00us, 1.01s) in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}

# Runs wrk with the given arguments against a process, and prints
# "rps p50_ms p99_ms cpu_us_per_request errors ctx_switches_per_request
# client_cpu_percent" (errors: socket errors and non-2xx responses; p99 is
# n/a where wrk's percentiles break, under pipelining; the client's CPU is
# wrk's user+sys over its run time: near 100, wrk itself is the limit).
# Usage: wrk_run PID WRK_ARGS...
wrk_run() {
  local pid=$1 before after out requests rps p50 p99 errors non2xx switches client
  shift
  switches=$(ctx_switches "$pid")
  before=$(cpu_ns "$pid")
  out=$( { TIMEFORMAT='client %U %S %R'; time wrk "$@"; } 2>&1)
  after=$(cpu_ns "$pid")
  client=$(awk '$1 == "client" { printf "%.0f", ($2 + $3) / $4 * 100 }' <<<"$out")
  switches=$(( $(ctx_switches "$pid") - switches ))
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  awk -v v="$p99" 'BEGIN { exit !(v + 0 == 0) }' && p99=n/a
  errors=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10; found=1} END {if (!found) print 0}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  awk -v r="${requests:-0}" -v b="$before" -v a="$after" -v rps="${rps:-0}" -v p50="$p50" -v p99="$p99" -v e="$errors" -v n="${non2xx:-0}" -v s="$switches" -v c="${client:-0}" \
    'BEGIN { printf "%s %s %s %.3f %s %.3f %s\n", rps, p50, p99, r ? (a - b) / 1000 / r : 0, e + n, r ? s / r : 0, c }'
}

# At exit: kills the servers in the `pids` array and the nginx whose pid
# file is in `$work`, and removes `$work` (a script's own variables).
stop_servers() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}

# The median of the numbers on stdin (one per line).
median() { grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Starts nginx in directory $1 on 127.0.0.1:$2 with one worker: `/` returns
# `Hello, World!`; `/bytes/<n>` serves files of n bytes (1024, 16384,
# 65536, 262144, 1048576) with sendfile. $3: extra `listen` parameters (e.g. `deferred`).
# With TLS_CERT and TLS_KEY set: HTTPS with that certificate, TLS 1.3 only.
# Prints the worker's PID.
start_nginx() {
  local dir=$1 port=$2 listen_options=${3:-} n tls=""
  if [ -n "${TLS_CERT:-}" ]; then
    listen_options="$listen_options ssl"
    tls="ssl_certificate $TLS_CERT; ssl_certificate_key $TLS_KEY; ssl_protocols TLSv1.3;"
  fi
  mkdir -p "$dir/logs" "$dir/www"
  for n in 1024 16384 65536 262144 1048576; do head -c "$n" /dev/zero | tr '\0' x >"$dir/www/$n"; done
  # nginx's worker runs as an unprivileged user (mktemp -d makes 0700).
  chmod -R a+rX "$dir"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 20000;
error_log $dir/logs/error.log;
pid $dir/nginx.pid;
events { worker_connections 20000; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 65s;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$port $listen_options;
    $tls
    location / { default_type text/plain; return 200 "Hello, World!"; }
    location /bytes/ { default_type application/octet-stream; alias $dir/www/; }
  }
}
CONF
  nginx -p "$dir" -c "$dir/nginx.conf" || return 1
  sleep 0.3
  pgrep -P "$(cat "$dir/nginx.pid")" | head -1
}

# Writes PREFIX/nginx.conf: config/nginx-upstream.conf with its ports and
# upstream pool set, nginx's files under PREFIX, run in the foreground.
# Usage: nginx_proxy_conf PREFIX SERVER_PORT PROXY_PORT UPSTREAM_TIMEOUT
#          UPSTREAM_KEEPALIVE WORKERS ERROR_LOG_LEVEL
nginx_proxy_conf() {
  local prefix=$1 server_port=$2 proxy_port=$3 timeout=$4 keepalive=$5 workers=$6 level=$7
  sed -e "s/server 127\\.0\\.0\\.1:8080;/server 127.0.0.1:$server_port;/" \
    -e "s/listen 127\\.0\\.0\\.1:8088;/listen 127.0.0.1:$proxy_port;/" \
    -e "s/keepalive_timeout 60s;/keepalive_timeout $timeout;/" \
    -e "s/keepalive 32;/keepalive $keepalive;/" \
    config/nginx-upstream.conf >"$prefix/upstream.conf"
  grep -q "keepalive_timeout $timeout;" "$prefix/upstream.conf"
  cat >"$prefix/nginx.conf" <<EOF
worker_processes $workers;
daemon off;
pid $prefix/nginx.pid;
error_log $prefix/error.log $level;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $prefix/client_body;
  proxy_temp_path $prefix/proxy;
  fastcgi_temp_path $prefix/fastcgi;
  uwsgi_temp_path $prefix/uwsgi;
  scgi_temp_path $prefix/scgi;
  include $prefix/upstream.conf;
}
EOF
}

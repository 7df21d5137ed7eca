# Sourced by the HTTP bench drivers (bash, after proc.sh) and tests that run nginx: nginx
# unprivileged, in the foreground, everything it writes under one scratch directory; a
# server started and waited for until it answers.

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# nginx's worker_connections (a driver holding more connections open raises it).
nginx_connections=1024

# nginx_conf DIR PORT [SERVER_LINES [HTTP_LINES [LISTEN_FLAGS]]]: writes DIR/nginx.conf (and
# makes DIR): one worker, no master, listening on 127.0.0.1:PORT, GET / answered 200 "Hello,
# World!" as text/plain, keep-alive for a million requests a connection, no access log;
# SERVER_LINES go into the server block (a root, an access_log of its own), HTTP_LINES into
# the http block (a log_format), LISTEN_FLAGS after the listen address ("http2" for h2c by
# prior knowledge, "ssl http2" for h2 by ALPN: nginx 1.22's spelling). Run it with:
# "$nginx_bin" -p DIR -c DIR/nginx.conf
nginx_conf() {
    mkdir -p "$1"
    cat >"$1/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections $nginx_connections; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    ${4:-}
    server {
        listen 127.0.0.1:$2 ${5:-};
        location = / { default_type text/plain; return 200 "Hello, World!"; }
        ${3:-}
    }
}
CONF
}

# How start_http_server asks whether a server is up: the URL's scheme (http_scheme) and curl's
# options (http_probe). The defaults ask in HTTP/1.1; an HTTP/2 driver sets, e.g.,
# http_probe=(--http2-prior-knowledge), or http_scheme=https and http_probe=(-k --http2).
http_scheme=http http_probe=()

# start_http_server NAME PORT CMD...: runs CMD in the background pinned (pin_server, may be
# empty), its output in $tmp/server.log, as server_pid; returns once GET / on 127.0.0.1:PORT
# is answered. When it is not within 15 s, or the server exits, prints its log (and nginx's
# error log under $tmp/nginx) and exits 1.
start_http_server() {
    local name=$1 port=$2 log=$tmp/server.log
    shift 2
    : >"$log" # here, not in the child: the wait below must not read the last server's log
    "${pin_server[@]}" "$@" >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 300); do
        if curl -s --max-time 1 "${http_probe[@]}" -o /dev/null "$http_scheme://127.0.0.1:$port/"
        then
            return 0
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    echo "$0: $name did not start:" >&2
    cat "$log" "$tmp/nginx/error.log" >&2 2>/dev/null || true
    exit 1
}

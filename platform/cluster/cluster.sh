#!/usr/bin/env bash
# A Chronicle cluster on one machine: several "hosts" (network namespaces on a private
# bridge), a PostgreSQL pair that fails over by itself (pg_auto_failover: a monitor and two
# data nodes with synchronous replication), two frontends behind HAProxy, two shard
# owners and a worker. It is the shape of a production deployment, small enough for a
# laptop or a CI machine: every process sees only its own address and reaches the others
# over the bridge, as it would over a LAN.
#
#   platform/cluster/cluster.sh up       build it (idempotent: a running cluster is kept)
#   platform/cluster/cluster.sh status   each host, its processes and their health
#   platform/cluster/cluster.sh down     remove everything `up` made (works after a half-failed up)
#   platform/cluster/cluster.sh primary  the name of the data node that is primary now
#   platform/cluster/cluster.sh kill HOST  kill every process of HOST at once (a host crash)
#   platform/cluster/cluster.sh restart HOST  stop HOST's processes and start them again
#                                           (a PostgreSQL node rejoins as a standby)
#   platform/cluster/cluster.sh cut HOST [PEER...]  partition HOST from its PEERs (from every
#                                           other host when none is named); `heal` ends it
#   platform/cluster/cluster.sh manage HOST ARGS...  a manage.py command on HOST, with the
#                                           cluster's environment
#
# Needs root (namespaces, the bridge), the PostgreSQL 15 server binaries and the project's
# virtualenv (.venv). Installs pg_auto_failover and HAProxy with apt-get when they are
# missing (CHRONICLE_CLUSTER_NO_APT=1 refuses instead), and nftables for `cut`. Touches
# nothing of the host but its own bridge and veth pairs (and, during a `cut`, one nftables
# table of the bridge family, chr_cut, matching only those ports): no route, no other
# firewall rule, no system PostgreSQL.
# State (data, logs, the secret key, the API key) lives in CHRONICLE_CLUSTER_DIR
# (default .chronicle/cluster), removed by `down` unless CHRONICLE_CLUSTER_KEEP=1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${CHRONICLE_CLUSTER_DIR:-$ROOT/.chronicle/cluster}
PGBIN=${CHRONICLE_CLUSTER_PGBIN:-/usr/lib/postgresql/15/bin}
PY=$ROOT/.venv/bin/python
HAPROXY_CFG=$ROOT/platform/cluster/haproxy.cfg
NET=10.77.0
BRIDGE=chr-br0
BRIDGE_IP=$NET.1
NS_PREFIX=chr-
PG_PORT=5432
WEB_PORT=7243
LB_PORT=7243
DBNAME=chronicle
DBUSER=chronicle
NAMESPACE=default
MONITOR_URI="postgres://autoctl_node@$NET.10:$PG_PORT/pg_auto_failover?sslmode=disable"
DATABASE_URL="postgres://$DBUSER@$NET.11,$NET.12:$PG_PORT/$DBNAME?target_session_attrs=read-write&connect_timeout=3"
LB_URL="http://$NET.20:$LB_PORT"

# name address role: the hosts, in start order.
HOSTS=(
	"monitor $NET.10 pg-monitor"
	"pg1 $NET.11 pg-data"
	"pg2 $NET.12 pg-data"
	"fe1 $NET.21 frontend"
	"fe2 $NET.22 frontend"
	"lb $NET.20 haproxy"
	"so1 $NET.31 shard-owner"
	"so2 $NET.32 shard-owner"
	"wk1 $NET.41 worker"
)

say() { printf '%s cluster: %s\n' "$(date +%H:%M:%S)" "$*"; }
die() {
	say "error: $*" >&2
	exit 1
}
die_log() { # die_log LOG MESSAGE: die, with the end of LOG (it goes with `down`)
	tail -n 25 "$1" | sed 's/^/    /' >&2 || true
	die "$2 (see $1)"
}

host_field() { # host_field NAME INDEX: a field of NAME's line in HOSTS
	local line
	for line in "${HOSTS[@]}"; do
		read -r -a f <<<"$line"
		if [[ ${f[0]} == "$1" ]]; then
			echo "${f[$2]}"
			return 0
		fi
	done
	return 1
}
host_ip() { host_field "$1" 1; }
ns() { echo "$NS_PREFIX$1"; }
# in_ns HOST CMD...: run CMD inside HOST's namespace. `ip netns exec` also gives CMD a
# mount namespace of its own (private to it, nothing propagates back): on a PostgreSQL
# host, /run/postgresql there is that host's own folder, so its sockets and lock files
# never meet another node's, nor the system cluster's in the real /run/postgresql.
in_ns() {
	local host=$1
	shift
	if [[ $host == monitor || $host == pg? ]]; then
		# shellcheck disable=SC2016 # expanded by the inner bash
		ip netns exec "$(ns "$host")" bash -c 'mount --bind "$1" /run/postgresql && shift && exec "$@"' \
			bind "$STATE/pg/$host/socket" "$@"
	else
		ip netns exec "$(ns "$host")" "$@"
	fi
}

wait_for() { # wait_for SECONDS WHAT CMD...: retry CMD each half second until it succeeds
	local seconds=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what not ready after ${seconds}s (logs: $STATE/logs, removed by down)"
		sleep 0.5
	done
}

# ---- preflight -------------------------------------------------------------------------

need_root() { [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces and a bridge)"; }

ensure_packages() {
	local missing=()
	command -v pg_autoctl >/dev/null || missing+=(postgresql-15-auto-failover pg-auto-failover-cli)
	command -v haproxy >/dev/null || missing+=(haproxy)
	command -v ip >/dev/null || missing+=(iproute2)
	command -v nft >/dev/null || missing+=(nftables)
	((${#missing[@]} == 0)) && return 0
	if [[ ${CHRONICLE_CLUSTER_NO_APT:-0} == 1 ]] || ! command -v apt-get >/dev/null; then
		die "missing ${missing[*]}; install them (apt-get install ${missing[*]}) and run again"
	fi
	say "installing ${missing[*]} with apt-get"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >"$STATE/apt.log" 2>&1 || {
		apt-get update -q >>"$STATE/apt.log" 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >>"$STATE/apt.log" 2>&1
	} || die "apt-get could not install ${missing[*]} (see $STATE/apt.log)"
}

preflight() {
	need_root
	[[ -x $PGBIN/pg_ctl ]] || die "no PostgreSQL 15 server binaries in $PGBIN (apt-get install postgresql-15)"
	[[ -x $PY ]] || die "no virtualenv at $ROOT/.venv (make venv)"
	[[ $ROOT$STATE != *[[:space:]]* ]] || die "the checkout and state paths must not hold spaces"
	mkdir -p "$STATE"
	ensure_packages
	id postgres >/dev/null 2>&1 || die "no 'postgres' user (PostgreSQL refuses to run as root)"
}

# ---- network ---------------------------------------------------------------------------

network_up() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	local line name addr
	for line in "${HOSTS[@]}"; do
		read -r name addr _ <<<"$line"
		ip netns add "$(ns "$name")"
		# Host side chrv-NAME on the bridge, namespace side renamed eth0.
		ip link add "chrv-$name" type veth peer name "chrp-$name"
		ip link set "chrv-$name" master "$BRIDGE" up
		ip link set "chrp-$name" netns "$(ns "$name")"
		ip netns exec "$(ns "$name")" ip link set "chrp-$name" name eth0
		ip netns exec "$(ns "$name")" ip addr add "$addr/24" dev eth0
		ip netns exec "$(ns "$name")" ip link set lo up
		ip netns exec "$(ns "$name")" ip link set eth0 up
	done
}

network_down() {
	local line name
	for line in "${HOSTS[@]}"; do
		read -r name _ <<<"$line"
		ip link del "chrv-$name" 2>/dev/null || true
		ip netns del "$(ns "$name")" 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
}

# ---- processes -------------------------------------------------------------------------

# spawn HOST NAME [--as USER] CMD...: start CMD in HOST's namespace in a session of its
# own, output added to logs/NAME.log, pid to run/NAME.pid.
spawn() {
	local host=$1 name=$2
	shift 2
	local as=()
	if [[ $1 == --as ]]; then
		as=(runuser -u "$2" --)
		shift 2
	fi
	in_ns "$host" setsid "${as[@]}" "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE/run/$name.pid"
}

host_pids() { # host_pids HOST...: every process in those hosts' namespaces
	local host
	for host in "$@"; do
		ip netns pids "$(ns "$host")" 2>/dev/null || true
	done
}

# stop_hosts GRACE HOST...: TERM every process of the HOSTs, KILL what is left after
# GRACE seconds.
stop_hosts() {
	local grace=$1 pids deadline
	shift
	(($# > 0)) || return 0
	pids=$(host_pids "$@")
	[[ -n $pids ]] || return 0
	# shellcheck disable=SC2086 # a list of pids
	kill -TERM $pids 2>/dev/null || true
	deadline=$((SECONDS + grace))
	while ((SECONDS < deadline)); do
		pids=$(host_pids "$@")
		[[ -n $pids ]] || return 0
		sleep 0.3
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
	sleep 0.3
}

# Kill every process of HOST at once, as a power cut would.
kill_host() {
	local pids
	pids=$(ip netns pids "$(ns "$1")" 2>/dev/null || true)
	# shellcheck disable=SC2086
	[[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
}

# ---- PostgreSQL (pg_auto_failover) ------------------------------------------------------

# shellcheck source-path=SCRIPTDIR source=postgres.sh
source "$ROOT/platform/cluster/postgres.sh"

# ---- Chronicle -------------------------------------------------------------------------

secret_key() {
	if [[ ! -s $STATE/secret_key ]]; then
		(umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(50))' >"$STATE/secret_key")
	fi
	cat "$STATE/secret_key"
}

# chronicle HOST APPNAME CMD...: CMD with the environment every Chronicle process of the
# cluster shares (see platform/env.example), plus HOST's own folders and connection name.
chronicle_env() {
	local host=$1
	local dir=$STATE/hosts/$host
	mkdir -p "$dir/heartbeat" "$dir/metrics"
	echo env -C "$ROOT" "PATH=$ROOT/.venv/bin:/usr/bin:/bin" \
		"SECRET_KEY=$(secret_key)" "DATABASE_URL=$DATABASE_URL" \
		"ALLOWED_HOSTS=$NET.20,$NET.21,$NET.22,$BRIDGE_IP,127.0.0.1,localhost" \
		"CHRONICLE_DB_POOL_MIN=1" "CHRONICLE_DB_POOL_MAX=4" \
		"CHRONICLE_DB_APPLICATION_NAME=chronicle-$host" \
		"CHRONICLE_STATE_DIR=$dir" "CHRONICLE_STATIC_ROOT=$STATE/static" \
		"CHRONICLE_HEARTBEAT_DIR=$dir/heartbeat" "PROMETHEUS_MULTIPROC_DIR=$dir/metrics" \
		"CHRONICLE_WEB_CONCURRENCY=1" "CHRONICLE_ACCESS_LOG=" "CHRONICLE_LOG_LEVEL=INFO"
}

manage() { # manage HOST ARGS...: a manage.py command on HOST
	local host=$1
	shift
	# shellcheck disable=SC2046 # chronicle_env prints words on purpose
	in_ns "$host" $(chronicle_env "$host") "$PY" manage.py "$@"
}

provision() {
	say "migrating (once, from fe1, before any frontend starts)"
	local log=$STATE/logs/migrate.log
	manage fe1 migrate --noinput >"$log" 2>&1 || die_log "$log" "migrate failed"
	manage fe1 collectstatic --noinput >>"$log" 2>&1 || die_log "$log" "collectstatic failed"
	manage fe1 namespace create "$NAMESPACE" --reason "cluster bootstrap" >>"$log" 2>&1 ||
		die_log "$log" "namespace create failed"
	manage fe1 api_key create -n "$NAMESPACE" --name cluster --role client --role worker --role admin --json \
		>"$STATE/api_key.json" 2>>"$log" || die_log "$log" "api_key create failed"
	chmod 600 "$STATE/api_key.json"
	"$PY" - "$STATE/api_key.json" "$STATE/cluster.json" "$LB_URL" "$NAMESPACE" <<'EOF'
import json, os, sys
key = json.load(open(sys.argv[1]))["api_key"]
with open(os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
    json.dump({"url": sys.argv[3], "namespace": sys.argv[4], "api_key": key}, out, indent=2)
EOF
}

cluster_field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$STATE/cluster.json" "$1"; }

ready() { curl -fs -m 3 -o /dev/null "$1/readyz"; }

frontends_up() {
	local host
	start_host fe1
	start_host fe2
	for host in fe1 fe2; do
		wait_for 90 "frontend $host" ready "http://$(host_ip "$host"):$WEB_PORT"
	done
}

# HAProxy reads its addresses from the environment ("${LB_BIND}" and so on in haproxy.cfg).
haproxy_env() {
	echo env "LB_BIND=$NET.20:$LB_PORT" "FE1_ADDR=$NET.21:$WEB_PORT" "FE2_ADDR=$NET.22:$WEB_PORT"
}

haproxy_up() {
	# shellcheck disable=SC2046 # haproxy_env prints words on purpose
	$(haproxy_env) haproxy -c -q -f "$HAPROXY_CFG" || die "haproxy refused $HAPROXY_CFG"
	start_host lb
	wait_for 30 "HAProxy" ready "$LB_URL"
}

daemons_up() {
	local host
	for host in so1 so2 wk1; do
		start_host "$host"
	done
	sleep 2
	for host in so1 so2 wk1; do
		[[ -n $(ip netns pids "$(ns "$host")") ]] || die_log "$STATE/logs/$host.log" "$host exited at start"
	done
}

# start_host HOST: start HOST's process, at `up` or again after a crash (a PostgreSQL node
# that exists is run, and rejoins; `up` creates them).
start_host() {
	local host=$1
	# shellcheck disable=SC2046 # chronicle_env and pg_env print words on purpose
	case $(host_field "$host" 2) in
	frontend)
		spawn "$host" "$host" $(chronicle_env "$host") "$PY" -m gunicorn chronicle.asgi:application \
			-c platform/gunicorn.conf.py -b "0.0.0.0:$WEB_PORT"
		;;
	shard-owner)
		spawn "$host" "$host" $(chronicle_env "$host") "$PY" manage.py run_shard_owner --owner "$host"
		;;
	worker)
		spawn "$host" "$host" $(chronicle_env "$host") "CHRONICLE_URL=$LB_URL" "CHRONICLE_NAMESPACE=$NAMESPACE" \
			"CHRONICLE_API_KEY=$(cluster_field api_key)" "$PY" -m chronicle.demo_worker
		;;
	haproxy) spawn "$host" "$host" $(haproxy_env) haproxy -W -db -f "$HAPROXY_CFG" ;;
	pg-monitor | pg-data)
		spawn "$host" "$host" --as postgres $(pg_env "$host") pg_autoctl run --pgdata "$STATE/pg/$host/data"
		;;
	esac
}

# ---- partitions ------------------------------------------------------------------------

# A cut is a partition at the bridge, as a pulled cable or a failed switch port makes it:
# every frame between HOST's port and its PEERs' ports (all other ports, and this machine,
# when no peer is named) is dropped, both ways, without a word; no host's own network
# stack is touched, so its processes see only silence. One nftables table of the bridge
# family holds the cuts; `heal` (and `down`) delete it.
CUT_TABLE=chr_cut

cmd_cut() {
	local host=$1 peer ports=()
	shift
	# The arguments first, then the tools: a misnamed peer is the caller's to fix either way.
	for peer in "$@"; do
		host_ip "$peer" >/dev/null || die "cut HOST [PEER...]: $peer is not one of the cluster's hosts"
		ports+=("\"chrv-$peer\"")
	done
	command -v nft >/dev/null || die "cut needs nftables (apt-get install nftables)"
	local spec="table bridge $CUT_TABLE {
		chain forward { type filter hook forward priority 0; policy accept; }
		chain input { type filter hook input priority 0; policy accept; }
		chain output { type filter hook output priority 0; policy accept; }
	}"
	nft -f - <<<"$spec"
	if ((${#ports[@]} == 0)); then
		nft add rule bridge "$CUT_TABLE" forward iifname "chrv-$host" drop
		nft add rule bridge "$CUT_TABLE" forward oifname "chrv-$host" drop
		nft add rule bridge "$CUT_TABLE" input iifname "chrv-$host" drop
		nft add rule bridge "$CUT_TABLE" output oifname "chrv-$host" drop
	else
		local set
		set="{ $(IFS=,; echo "${ports[*]}") }"
		nft add rule bridge "$CUT_TABLE" forward iifname "chrv-$host" oifname "$set" drop
		nft add rule bridge "$CUT_TABLE" forward iifname "$set" oifname "chrv-$host" drop
	fi
}

cmd_heal() {
	if command -v nft >/dev/null && nft list table bridge "$CUT_TABLE" >/dev/null 2>&1; then
		nft delete table bridge "$CUT_TABLE"
	fi
}

# ---- commands --------------------------------------------------------------------------

all_running() {
	[[ -f $STATE/up.done ]] || return 1
	local line name
	for line in "${HOSTS[@]}"; do
		read -r name _ <<<"$line"
		[[ -n $(ip netns pids "$(ns "$name")" 2>/dev/null) ]] || return 1
	done
}

cmd_up() {
	preflight
	if all_running; then
		say "already up"
		cmd_status
		return 0
	fi
	if ip link show "$BRIDGE" >/dev/null 2>&1 || [[ -n $(ip netns list | grep "^$NS_PREFIX" || true) ]]; then
		say "clearing what an earlier cluster left"
		cmd_down
	fi
	local started=$SECONDS
	mkdir -p "$STATE/logs" "$STATE/run" "$STATE/hosts"
	say "network: bridge $BRIDGE ($BRIDGE_IP/24), ${#HOSTS[@]} namespaces"
	network_up
	say "PostgreSQL: monitor on $(host_ip monitor)"
	pg_monitor_up
	say "PostgreSQL: pg1 on $(host_ip pg1) (primary)"
	pg_data_up pg1 single
	say "PostgreSQL: pg2 on $(host_ip pg2) (synchronous standby)"
	pg_data_up pg2 secondary
	wait_for 60 "pg1 as primary" node_is pg1 primary
	pg_allow_chronicle
	provision
	say "frontends fe1, fe2"
	frontends_up
	say "HAProxy on $LB_URL"
	haproxy_up
	say "shard owners so1, so2 and the demo worker on wk1"
	daemons_up
	touch "$STATE/up.done"
	say "up in $((SECONDS - started)) s"
	echo
	echo "Chronicle cluster"
	echo "  url          $LB_URL  (HAProxy; frontends $NET.21, $NET.22 on :$WEB_PORT)"
	echo "  namespace    $NAMESPACE"
	echo "  api_key      $(cluster_field api_key)"
	echo "  database     $DATABASE_URL"
	echo "  (saved to $STATE/cluster.json)"
}

cmd_down() {
	need_root
	# Clients first, then the servers they use, PostgreSQL last.
	stop_hosts 15 wk1 so1 so2 lb fe1 fe2
	stop_hosts 15 pg1 pg2
	stop_hosts 15 monitor
	cmd_heal
	network_down
	if [[ ${CHRONICLE_CLUSTER_KEEP:-0} == 1 ]]; then
		rm -f "$STATE/up.done"
		say "down (state kept in $STATE)"
	else
		rm -rf "$STATE"
		say "down"
	fi
}

cmd_status() {
	local line name addr role pids health procs
	printf '%-8s %-11s %-12s %-13s %s\n' HOST ADDRESS ROLE HEALTH PROCESSES
	for line in "${HOSTS[@]}"; do
		read -r name addr role <<<"$line"
		if ! ip netns list 2>/dev/null | grep -q "^$(ns "$name")\b"; then
			printf '%-8s %-11s %-12s %-13s %s\n' "$name" "$addr" "$role" absent -
			continue
		fi
		pids=$(ip netns pids "$(ns "$name")" 2>/dev/null | tr '\n' ',' || true)
		pids=${pids%,}
		procs=-
		[[ -z $pids ]] || procs=$(ps -o comm= -p "$pids" | sort | uniq -c | awk '{printf "%s%s(%s)", sep, $2, $1; sep=" "}')
		case $role in
		frontend) ready "http://$addr:$WEB_PORT" && health=ready || health=unready ;;
		haproxy) ready "$LB_URL" && health=ready || health=unready ;;
		pg-monitor) monitor_sql "select 1" >/dev/null 2>&1 && health=up || health=down ;;
		pg-data) health=$(node_state "$name" || true) && health=${health:-unknown} ;;
		*) [[ -n $pids ]] && health=running || health=stopped ;;
		esac
		[[ -n $pids ]] || health=dead
		printf '%-8s %-11s %-12s %-13s %s\n' "$name" "$addr" "$role" "$health" "$procs"
	done
	if [[ -f $STATE/cluster.json ]]; then
		echo "load balancer: $LB_URL/readyz from this host: $(curl -s -m 3 -o /dev/null -w '%{http_code}' "$LB_URL/readyz" || true)"
	fi
}

main() {
	case ${1:-} in
	up) cmd_up ;;
	down) cmd_down ;;
	status) cmd_status ;;
	primary) primary_node ;;
	restart)
		if [[ -z ${2:-} ]] || ! host_ip "$2" >/dev/null; then
			die "restart HOST: one of the cluster's hosts"
		fi
		need_root
		stop_hosts 15 "$2"
		start_host "$2"
		;;
	kill)
		if [[ -z ${2:-} ]] || ! host_ip "$2" >/dev/null; then
			die "kill HOST: one of the cluster's hosts"
		fi
		kill_host "$2"
		;;
	cut)
		if [[ -z ${2:-} ]] || ! host_ip "$2" >/dev/null; then
			die "cut HOST [PEER...]: one of the cluster's hosts"
		fi
		need_root
		shift
		cmd_cut "$@"
		;;
	heal)
		need_root
		cmd_heal
		;;
	manage)
		if [[ -z ${2:-} ]] || ! host_ip "$2" >/dev/null; then
			die "manage HOST ARGS...: one of the cluster's hosts"
		fi
		need_root
		shift
		manage "$@"
		;;
	*)
		echo "usage: $0 up|down|status|primary|kill HOST|restart HOST|cut HOST [PEER...]|heal|manage HOST ARGS..." >&2
		exit 2
		;;
	esac
}

main "$@"

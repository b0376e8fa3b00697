# Sourced by cluster.sh: the PostgreSQL side of the cluster, a pg_auto_failover monitor
# and two data nodes. Uses cluster.sh's settings and helpers (STATE, PGBIN, in_ns, spawn,
# wait_for, host_ip, ...).
# shellcheck shell=bash
# shellcheck disable=SC2154 # the variables are cluster.sh's

# ---- PostgreSQL (pg_auto_failover) ------------------------------------------------------

# pg_env NODE: the environment of NODE's pg_autoctl: its config and runtime folders
# under the state dir, so nothing lands in the postgres user's home or in /tmp.
pg_env() {
	local dir=$STATE/pg/$1
	echo env "PATH=$PGBIN:/usr/bin:/bin" "HOME=$dir" \
		"XDG_CONFIG_HOME=$dir/config" "XDG_DATA_HOME=$dir/share" "XDG_RUNTIME_DIR=$dir/runtime"
}

pg_prepare() {
	local dir=$STATE/pg/$1
	mkdir -p "$dir/socket" "$dir/config" "$dir/share" "$dir/runtime"
	chown -R postgres:postgres "$dir"
	chmod 700 "$dir"
}

# as_pg NODE CMD...: CMD as the postgres user in NODE's namespace and environment.
as_pg() {
	local node=$1
	shift
	# shellcheck disable=SC2046 # pg_env prints words on purpose
	in_ns "$node" runuser -u postgres -- $(pg_env "$node") "$@"
}

monitor_sql() { as_pg monitor psql -X -qAt -d pg_auto_failover -c "$1"; }

# node_state NODE: the state the monitor last heard from NODE (primary, secondary, ...).
node_state() {
	monitor_sql "select reportedstate from pgautofailover.node where nodename = '$1'" 2>/dev/null
}

primary_node() {
	monitor_sql "select nodename from pgautofailover.node
	             where reportedstate in ('primary', 'wait_primary', 'single')
	               and goalstate = reportedstate order by nodeid limit 1" 2>/dev/null
}

node_is() { [[ $(node_state "$1") == "$2" ]]; }

# node_reaches NODE STATE: node_is, and while a standby copies the primary, ask the
# primary for an immediate checkpoint: pg_basebackup's own is spread over minutes.
node_reaches() {
	node_is "$1" "$2" && return 0
	if [[ $(node_state "$1") == @(wait_standby|catchingup) ]]; then
		as_pg pg1 psql -X -qAt -d postgres -c checkpoint >/dev/null 2>&1 || true
		sleep 1
	fi
	return 1
}

pg_monitor_up() {
	pg_prepare monitor
	# shellcheck disable=SC2046 # pg_env prints words on purpose
	spawn monitor monitor --as postgres $(pg_env monitor) pg_autoctl create monitor \
		--pgdata "$STATE/pg/monitor/data" --pgport "$PG_PORT" --hostname "$(host_ip monitor)" \
		--auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" --run
	wait_for 90 "the monitor" monitor_sql "select 1 from pgautofailover.node limit 1"
	# Fail over in seconds rather than the defaults' half a minute: a check every 2 s, a
	# node unhealthy after 6 s without a report. primary_demote_timeout (how long the
	# monitor gives a lost primary to demote itself) stays above the data nodes'
	# network_partition_timeout (after which a cut-off primary stops itself), so there
	# is never a moment with two primaries.
	local setting
	for setting in health_check_period=2000 health_check_timeout=1000 health_check_max_retries=1 \
		health_check_retry_delay=1000 node_considered_unhealthy_timeout=6000 primary_demote_timeout=12000; do
		monitor_sql "alter system set pgautofailover.${setting%%=*} = ${setting#*=}" >/dev/null
	done
	monitor_sql "select pg_reload_conf()" >/dev/null
}

pg_data_up() { # pg_data_up NODE STATE: start data node NODE, wait until it reports STATE
	local node=$1 want=$2
	pg_prepare "$node"
	# shellcheck disable=SC2046
	spawn "$node" "$node" --as postgres $(pg_env "$node") pg_autoctl create postgres \
		--pgdata "$STATE/pg/$node/data" --pgport "$PG_PORT" \
		--listen '*' --hostname "$(host_ip "$node")" --name "$node" --dbname "$DBNAME" \
		--monitor "$MONITOR_URI" --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" \
		--replication-quorum true --run
	wait_for 180 "PostgreSQL node $node ($want)" node_reaches "$node" "$want"
	as_pg "$node" pg_autoctl config set --pgdata "$STATE/pg/$node/data" \
		timeout.network_partition_timeout 8 >/dev/null
}

# The Chronicle hosts' way in: the chronicle role, from the cluster's subnet. The lines
# go into both data nodes' pg_hba.conf (each keeps its own file), with the keepalives.
pg_allow_chronicle() {
	local node hba
	as_pg pg1 psql -X -q -d "$DBNAME" -c \
		"do \$\$ begin
		   if not exists (select from pg_roles where rolname = '$DBUSER') then
		     create role $DBUSER login;
		   end if;
		 end \$\$;
		 alter database $DBNAME owner to $DBUSER;"
	for node in pg1 pg2; do
		hba=$STATE/pg/$node/data/pg_hba.conf
		grep -q "^host $DBNAME $DBUSER $NET.0/24" "$hba" ||
			echo "host $DBNAME $DBUSER $NET.0/24 trust" >>"$hba"
		# A node that rejoins after a failover rewinds (pg_rewind, from the new primary)
		# through the postgres database, which pg_auto_failover's own lines leave out:
		# without this line the rewind is refused and the node copies the whole cluster
		# again with pg_basebackup, after a spread checkpoint of minutes.
		grep -q "^host postgres pgautofailover_replicator $NET.0/24" "$hba" ||
			echo "host postgres pgautofailover_replicator $NET.0/24 trust" >>"$hba"
		# The server's side of a client cut off without a word (a shard owner behind a
		# partition): without keepalives its session, and the row locks of a transaction
		# it had open (a shard's fence), outlive the cut by hours, and no other owner can
		# take that shard over. With them the session ends about 10 s into the silence.
		as_pg "$node" psql -X -qAt -d postgres -c "alter system set tcp_keepalives_idle = 5" \
			-c "alter system set tcp_keepalives_interval = 2" -c "alter system set tcp_keepalives_count = 3" \
			-c "alter system set tcp_user_timeout = 10000" -c "select pg_reload_conf()" >/dev/null
	done
	# A reload is a signal, taken in its own time: wait until the Chronicle hosts get in,
	# through the very connection string they will use.
	wait_for 30 "the chronicle role's access from the subnet" in_ns fe1 psql -X -qAt "$DATABASE_URL" -c "select 1"
}

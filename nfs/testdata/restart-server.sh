#!/bin/sh
# restart-server.sh DIR SECONDS RESTARTS DRAIN STOP COMMAND...
#
# The guest's side of TestLinuxRestarts/rxe, which runs the server in the
# guest: there the restarts are timed in the guest, since other tests may
# hold the lab's command channel for minutes. In DIR, where COMMAND (an
# `rpcrdma nfs serve`) runs already with its process ID in DIR/pid and its
# log in DIR/server.log, it stops the server and starts it again RESTARTS
# times, evenly over SECONDS seconds from now, the first after
# SECONDS/(RESTARTS+1); then it creates the file STOP once SECONDS have
# passed, telling the workload to end.
#
# Before each stop the client must have connected to the running server
# (an "nfs: connection opened" line for RDMA since its last "nfs: serving";
# Linux's client reconnects when it has calls to send, backing off up to
# 30 s). A stop is SIGTERM, on which the server lets its calls in flight
# finish (within DRAIN seconds) and logs "stopped"; it must exit within
# DRAIN+30 seconds, and its log must hold no warning or error. Then, after
# 2 s with nothing listening, COMMAND starts again. The script prints a
# line per restart, stops at the first step that fails, saying what
# failed, and writes its exit status to DIR/rc.
set -u
dir=$1
secs=$2
n=$3
drain=$4
stop=$5
shift 5
k=0
fail() {
	echo "FAIL at restart $k: $*"
	echo 1 >"$dir/rc"
	exit 1
}
cd "$dir" || exit 1
rm -f rc
log=server.log
# running waits until the server has said "serving" $1 times.
running() {
	for _ in $(seq 600); do
		[ "$(grep -c 'nfs: serving' $log)" -ge "$1" ] && return 0
		kill -0 "$(cat pid)" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# reached waits (two minutes at most) until the client has connected to
# the server started last.
reached() {
	for _ in $(seq 120); do
		c=$(awk '/nfs: serving/ {c = 0} /nfs: connection opened/ && /transport=rdma/ {c++} END {print c + 0}' $log)
		[ "$c" -gt 0 ] && return 0
		sleep 1
	done
	return 1
}
begin=$(date +%s)
while [ "$k" -lt "$n" ]; do
	reached || fail "the client did not connect to server $k within two minutes"
	at=$((begin + secs * (k + 1) / (n + 1)))
	while [ "$(date +%s)" -lt "$at" ]; do sleep 1; done
	pid=$(cat pid)
	t0=$(date +%s)
	kill -TERM "$pid" || fail "kill -TERM $pid"
	for _ in $(seq $((drain + 30))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	! kill -0 "$pid" 2>/dev/null || fail "server $k still runs $((drain + 30)) s after SIGTERM"
	[ "$(grep -c 'msg=stopped' $log)" -eq $((k + 1)) ] || fail "server $k did not log that it stopped"
	! grep -E 'level=(WARN|ERROR)' $log || fail "server $k logged the warnings or errors above"
	echo "server $k stopped in $(($(date +%s) - t0)) s: $(grep msg=stopped $log | tail -n 1)"
	sleep 2
	k=$((k + 1))
	t0=$(date +%s)
	setsid "$@" >>$log 2>&1 </dev/null &
	echo $! >pid
	running $((k + 1)) || fail "server $k did not start"
	echo "restart $k done, $(($(date +%s) - begin)) s in; server $k started in $(($(date +%s) - t0)) s"
done
reached || fail "the client did not connect to server $k within two minutes"
while [ "$(date +%s)" -lt $((begin + secs)) ]; do sleep 1; done
touch "$stop" || fail "touch $stop"
echo 0 >rc

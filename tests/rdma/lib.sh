# tests/rdma/lib.sh - sourced by the RDMA suite's scripts (not a test).

# listening OUT: wait until the server whose output goes to OUT says
# "listening" (5 s at most; a server that never does fails its client).
# OUT must be emptied before that server starts: a stale "listening" of
# an earlier one must not start the client.
listening() {
	for _ in $(seq 100); do grep -q listening "$1" && return 0; sleep 0.05; done
	return 0
}

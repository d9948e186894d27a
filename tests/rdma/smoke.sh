build/shuntd --cgroup /sys/fs/cgroup --socket /tmp/agent.sock > /tmp/agent.log 2>&1 &
sleep 0.5; cat /tmp/agent.log
export SHUNT_AGENT_SOCK=/tmp/agent.sock SHUNT_TRANSPORT=rdma SHUNT_LOG=1 SHUNT_DIR=/tmp/sd SHUNT_ACCEPT_WAIT_MS=5000
build/shunt run -- build/tests/tools/peer server 10.0.0.1 7000 cfirst &
sleep 0.5
timeout 60 build/shunt run -- build/tests/tools/peer client 10.0.0.1 7000 cfirst
echo "client rc=$?"
wait %2; echo "server rc=$?"

#!/bin/bash
# A cluster of N nodes on this machine, for the tests that need ranks on
# different nodes (tests/cluster/README.md).
#
#   cluster.sh up [--slurm | --link RATE] NODES [DIR]
#                                make the nodes' files in DIR (default
#                                /tmp/collar-cluster): launchers in DIR/bin;
#                                --slurm: Slurm's daemons on the nodes too;
#                                --link RATE: a network of the nodes' own,
#                                each node's link at RATE (800mbit, 2gbit)
#   cluster.sh down [DIR]        stop whatever still runs on the nodes,
#                                remove DIR; exit 1 if something was left
#   cluster.sh check [DIR]       exit 1 if a process of the cluster runs
#                                or a collar-* name of its jobs is in
#                                /dev/shm
#   cluster.sh --help
#
# A node is a UTS namespace with its own host name (cnode1, cnode2, ...),
# each name on a loopback address of its own (127.0.10.K) in a private copy
# of /etc/hosts that only the cluster's processes see (a mount namespace:
# the machine's /etc/hosts is never written).  Processes are started on a
# node as ssh would start them: by a stand-in of ssh (DIR/agent) that
# clears the environment (PATH and HOME stay, as a login shell has them),
# so only what a launcher passes on reaches the other nodes.  The launcher
# itself runs on the first node, as it does in a job.
#
# Launchers (each takes the real launcher's options, -np N, then the
# program; ranks are spread evenly, CLUSTER_PPN=K ranks a node to say it):
#   DIR/bin/mpirun    Open MPI's mpirun (mpirun.openmpi), with DIR/hostfile
#                     and DIR/agent as its rsh agent
#   DIR/bin/mpiexec   MPICH's Hydra (mpiexec.hydra or mpiexec.mpich), with
#                     -hosts and DIR/agent as its ssh
#   DIR/bin/srun      Slurm's srun (up --slurm): slurmctld on 127.0.0.1, a
#                     slurmd a node in its namespace, MpiDefault=pmix
# MPICH_LAUNCHER / OMPI_LAUNCHER name another real launcher (the wheel's
# mpiexec, say).
#
# Traffic between the nodes stays on loopback: Open MPI's TCP transports
# are held to lo, Hydra binds to lo and UCX uses lo; no other address is
# ever a target.  With --link, on the nodes' own network instead (eth0 in
# each node's network namespace, addresses that exist only there).  Every
# process started on a node carries CLUSTER_JOB_DIR=DIR in its
# environment, by which `down` finds what is left.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

cmd=${1:-}
case $cmd in
    -h|--help|help) usage; exit 0 ;;
    up|down|check) shift ;;
    *) usage >&2; exit 2 ;;
esac

slurm=0
link=""
if [ "$cmd" = up ]; then
    while [ $# -gt 0 ]; do
        case $1 in
            --slurm) slurm=1; shift ;;
            --link) link=${2:-}; shift 2 || { echo "cluster.sh up: --link needs a rate" >&2; exit 2; } ;;
            --link=*) link=${1#--link=}; shift ;;
            *) break ;;
        esac
    done
    if [ -n "$link" ]; then
        case $link in
            *[0-9]kbit|*[0-9]mbit|*[0-9]gbit) ;;
            *) echo "cluster.sh up: --link takes a rate as tc writes it (800mbit, 2gbit), not '$link'" >&2; exit 2 ;;
        esac
        [ $slurm = 0 ] || { echo "cluster.sh up: --slurm and --link together are not supported (slurmctld is on the host's loopback)" >&2; exit 2; }
    fi
    nodes=${1:-}
    case $nodes in
        ''|*[!0-9]*) echo "cluster.sh up: NODES must be a number from 1 to 64, not '$nodes'" >&2; exit 2 ;;
    esac
    [ "$nodes" -ge 1 ] && [ "$nodes" -le 64 ] || {
        echo "cluster.sh up: NODES must be from 1 to 64, not $nodes" >&2; exit 2; }
    shift
fi
dir=${1:-/tmp/collar-cluster}
case $dir in
    /*) ;;
    *) dir=$PWD/$dir ;;
esac

# The processes of the cluster: their environment names DIR.  `jobs`: all
# but Slurm's daemons (slurmctld, slurmd), which run as long as the
# cluster does; `daemons`: those alone; `all`.
cluster_pids() {
    local which=${1:-all} p comm
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" != "$$" ] || continue
        grep -qazxF "CLUSTER_JOB_DIR=$dir" "$p/environ" 2>/dev/null || continue
        comm=$(cat "$p/comm" 2>/dev/null)
        case $which:$comm in
            jobs:slurmctld|jobs:slurmd|daemons:[!s]*) continue ;;
            daemons:*) [ "$comm" = slurmctld ] || [ "$comm" = slurmd ] || continue ;;
        esac
        echo "${p#/proc/}"
    done
    return 0
}

# stop PIDS...: TERM, a second, KILL.
stop() {
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$@" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -KILL "$@" 2>/dev/null || true
}

shm_left() {
    [ -f "$dir/shm.before" ] || return 0
    # shellcheck disable=SC2010
    ls /dev/shm 2>/dev/null | grep '^collar-' | sort | comm -13 "$dir/shm.before" - || true
}

# The nodes' own network (cluster.sh up --link RATE): a network namespace
# a node, each joined by a veth pair to a bridge in a namespace of its own
# (the switch), addresses 10.254.N.K/24 that exist only in those
# namespaces; each node's side of its link sends at most RATE (tc's tbf:
# the machine's kernel has no netem, so no latency is added).  The
# host's own network is not touched.
link_up() {
    local id k ns pre
    id=$(( $(cksum <<<"$dir" | cut -d' ' -f1) % 200 + 20 ))
    pre="cl${id}n"
    ip netns add "${pre}sw" || { echo "cluster.sh: cannot make network namespaces (ip netns add)" >&2; exit 1; }
    echo "${pre}sw" >"$dir/netns"
    ip -n "${pre}sw" link add br0 type bridge
    ip -n "${pre}sw" link set br0 up
    for k in $(seq 1 "$nodes"); do
        ns="$pre$k"
        ip netns add "$ns"
        echo "$ns" >>"$dir/netns"
        ip link add "v$id-$k" netns "${pre}sw" type veth peer name eth0 netns "$ns"
        ip -n "${pre}sw" link set "v$id-$k" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "10.254.$id.$k/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$link" burst 512kb latency 200ms
    done
    echo "$pre" >"$dir/netns.prefix"
    echo "10.254.$id" >"$dir/net"
    echo "$link" >"$dir/link"
}

# A free TCP port from $1 up (ss -ltn), for slurmctld and each slurmd.
free_port() {
    local p=$1
    while ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; do
        p=$((p + 1))
    done
    echo $p
}

# Slurm on the nodes (cluster.sh up --slurm): slurmctld on 127.0.0.1, one
# slurmd a node in the node's namespace (its host name, its own port, its
# own PMIx client directory: the nodes share /tmp), no authentication
# (auth/none, cred/none: these daemons listen on loopback only and serve
# this machine's root), MpiDefault=pmix.  Debian's slurmd, slurmctld and
# slurm-client are installed where missing.
slurm_up() {
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
            || ! command -v srun >/dev/null; then
        command -v apt-get >/dev/null || {
            echo "cluster.sh: Slurm is not installed (slurmctld, slurmd, srun)" >&2; exit 1; }
        echo "cluster.sh: installing Slurm (slurmctld slurmd slurm-client)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client >"$dir/apt.log" 2>&1 \
            || { tail -20 "$dir/apt.log" >&2; exit 1; }
    fi
    local s=$dir/slurm k port base
    mkdir -p "$s/state" "$s/pmix"
    base=$(( 20000 + $(cksum <<<"$dir" | cut -d' ' -f1) % 20000 ))
    port=$(free_port $base)
    {
        echo "ClusterName=collar"
        echo "SlurmctldHost=localhost(127.0.0.1)"
        echo "SlurmctldPort=$port"
        echo "AuthType=auth/none"
        echo "CredType=cred/none"
        echo "ProctrackType=proctrack/pgid"
        echo "TaskPlugin=task/none"
        echo "SwitchType=switch/none"
        echo "MpiDefault=pmix"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$s/state"
        echo "SlurmdSpoolDir=$s/spool-%n"
        echo "SlurmctldPidFile=$s/slurmctld.pid"
        echo "SlurmdPidFile=$s/slurmd-%n.pid"
        echo "SlurmctldLogFile=$s/slurmctld.log"
        echo "SlurmdLogFile=$s/slurmd-%n.log"
        echo "SchedulerType=sched/builtin"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "ReturnToService=2"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SlurmdParameters=config_overrides"
        echo "PartitionName=nodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$s/slurm.conf"
    echo "PMIxCliTmpDirBase=$s/pmix" >"$s/mpi.conf"
    for k in $(seq 1 "$nodes"); do
        port=$(free_port $((port + 1)))
        echo "NodeName=cnode$k NodeAddr=127.0.10.$k Port=$port CPUs=64 State=UNKNOWN" >>"$s/slurm.conf"
        mkdir -p "$s/spool-cnode$k" "$s/pmix-cnode$k"
    done
    env CLUSTER_JOB_DIR="$dir" setsid slurmctld -D -f "$s/slurm.conf" >"$s/slurmctld.out" 2>&1 </dev/null &
    for k in $(seq 1 "$nodes"); do
        env -i PATH="$PATH" HOME="${HOME:-/root}" CLUSTER_JOB_DIR="$dir" setsid \
            unshare --uts --mount /bin/sh -c \
            'hostname "$0" && mount --bind "$1/pmix-$0" "$1/pmix" && exec slurmd -D -N "$0" -f "$1/slurm.conf"' \
            "cnode$k" "$s" >"$s/slurmd-cnode$k.out" 2>&1 </dev/null &
    done
    local idle=0
    for _ in $(seq 1 100); do
        idle=$(SLURM_CONF=$s/slurm.conf sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)
        [ "$idle" = "$nodes" ] && break
        sleep 0.2
    done
    if [ "$idle" != "$nodes" ]; then
        echo "cluster.sh: Slurm: $idle of $nodes nodes idle after 20 s ($s/*.log)" >&2
        tail -5 "$s/slurmctld.log" "$s/slurmd-cnode1.log" >&2 2>/dev/null
        exit 1
    fi
    {
        echo '#!/bin/sh'
        echo '# srun on the cluster'"'"'s Slurm: its nodes, the ranks spread evenly'
        echo '# (CLUSTER_PPN, or -n over the nodes), the MPI libraries'"'"' traffic on lo.'
        echo ". \"$dir/bin/ppn.sh\""
        echo "export SLURM_CONF=\"$s/slurm.conf\" CLUSTER_JOB_DIR=\"$dir\""
        echo 'export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo UCX_NET_DEVICES=lo'
        echo "exec srun -N $nodes --ntasks-per-node=\$ppn \"\$@\""
    } >"$dir/bin/srun"
    chmod +x "$dir/bin/srun"
}

case $cmd in
up)
    [ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (namespaces, mounts)" >&2; exit 1; }
    command -v unshare >/dev/null || { echo "cluster.sh: needs unshare (util-linux)" >&2; exit 1; }
    if [ -d "$dir" ] && [ -n "$(cluster_pids all)" ]; then
        echo "cluster.sh: processes of $dir still run; cluster.sh down $dir first" >&2
        exit 1
    fi
    rm -rf "$dir"
    mkdir -p "$dir/bin"
    cp /etc/hosts "$dir/hosts"
    : >"$dir/hostfile"
    hostlist=""
    net=127.0.10
    if [ -n "$link" ]; then
        link_up
        net=$(cat "$dir/net")
    fi
    for k in $(seq 1 "$nodes"); do
        printf '%s.%d cnode%d\n' "$net" "$k" "$k" >>"$dir/hosts"
        printf 'cnode%d slots=64\n' "$k" >>"$dir/hostfile"
        hostlist="$hostlist${hostlist:+,}cnode$k"
    done
    echo "$nodes" >"$dir/nodes"
    if [ -n "$link" ]; then echo eth0; else echo lo; fi >"$dir/iface"
    echo "$hostlist" >"$dir/hostlist"
    # shellcheck disable=SC2010
    ls /dev/shm 2>/dev/null | grep '^collar-' | sort >"$dir/shm.before" || true

    # The ssh stand-in: [options] HOST COMMAND...  The command runs in a
    # new UTS namespace named HOST with a cleared environment, under sh
    # (ssh hands the words to the remote shell as one line).
    cat >"$dir/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do
    case \$1 in
        -o|-p|-l|-i|-F) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
host=\$1
shift
case \$host in
    cnode[0-9]*) ;;
    *) echo "cluster agent: '\$host' is not a node of $dir" >&2; exit 255 ;;
esac
netns=""
[ -f "$dir/netns.prefix" ] && netns="ip netns exec \$(cat "$dir/netns.prefix")\${host#cnode}"
exec \$netns env -i PATH="\$PATH" HOME="\${HOME:-/root}" CLUSTER_JOB_DIR="$dir" \\
    unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' "\$host" "\$*"
EOF
    chmod +x "$dir/agent"

    # on_node1 COMMAND...: the launcher's own place, the first node, with
    # the cluster's /etc/hosts.
    cat >"$dir/bin/on-node1" <<EOF
#!/bin/sh
netns=""
[ -f "$dir/netns.prefix" ] && netns="ip netns exec \$(cat "$dir/netns.prefix")1"
exec \$netns env CLUSTER_JOB_DIR="$dir" unshare --uts --mount /bin/sh -c \\
    'mount --bind "$dir/hosts" /etc/hosts && hostname cnode1 && exec "\$@"' sh "\$@"
EOF
    chmod +x "$dir/bin/on-node1"

    # ranks_per_node ARGS...: CLUSTER_PPN, or -np N over the nodes (at
    # least 1).
    cat >"$dir/bin/ppn.sh" <<EOF
ppn=\${CLUSTER_PPN:-}
if [ -z "\$ppn" ]; then
    np=1
    prev=""
    for a in "\$@"; do
        case \$prev in -np|-n) np=\$a ;; esac
        prev=\$a
    done
    ppn=\$(( (np + $nodes - 1) / $nodes ))
fi
EOF

    cat >"$dir/bin/mpirun" <<EOF
#!/bin/sh
iface=\$(cat "$dir/iface")
real=\${OMPI_LAUNCHER:-\$(command -v mpirun.openmpi || command -v mpirun)}
case " \$* " in *" --version "*) exec "\$real" --version ;; esac
. "$dir/bin/ppn.sh"
# (The cluster runs as root: namespaces and mounts.)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$dir/bin/on-node1" "\$real" --hostfile "$dir/hostfile" \\
    --mca plm_rsh_agent "$dir/agent" --mca plm_rsh_no_tree_spawn 1 \\
    --mca btl_tcp_if_include \$iface --mca oob_tcp_if_include \$iface \\
    --map-by ppr:\$ppn:node "\$@"
EOF
    cat >"$dir/bin/mpiexec" <<EOF
#!/bin/sh
real=\${MPICH_LAUNCHER:-\$(command -v mpiexec.hydra || command -v mpiexec.mpich)}
case " \$* " in *" --version "*|*" -version "*) exec "\$real" --version ;; esac
. "$dir/bin/ppn.sh"
hosts=""
for h in \$(tr , ' ' <"$dir/hostlist"); do
    hosts="\$hosts\${hosts:+,}\$h:\$ppn"
done
iface=\$(cat "$dir/iface")
exec "$dir/bin/on-node1" env UCX_NET_DEVICES=\$iface "\$real" -hosts "\$hosts" \\
    -launcher ssh -launcher-exec "$dir/agent" -iface \$iface "\$@"
EOF
    chmod +x "$dir/bin/mpirun" "$dir/bin/mpiexec"
    launchers="$dir/bin/mpirun, $dir/bin/mpiexec"
    if [ $slurm = 1 ]; then
        slurm_up
        launchers="$launchers, $dir/bin/srun"
    fi
    echo "cluster.sh: $nodes nodes (cnode1..cnode$nodes) in $dir; launchers $launchers"
    ;;
check)
    left=0
    pids=$(cluster_pids jobs)
    if [ -n "$pids" ]; then
        echo "cluster.sh: processes left on the nodes of $dir:"
        for p in $pids; do
            echo "  $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
        done
        left=1
    fi
    shm=$(shm_left)
    if [ -n "$shm" ]; then
        echo "cluster.sh: left in /dev/shm: $shm"
        left=1
    fi
    exit $left
    ;;
down)
    [ -d "$dir" ] || exit 0
    left=0
    pids=$(cluster_pids jobs)
    if [ -n "$pids" ]; then
        echo "cluster.sh: stopping processes left on the nodes:" $pids
        # shellcheck disable=SC2086
        stop $pids
        left=1
    fi
    # shellcheck disable=SC2046
    stop $(cluster_pids daemons)
    if [ -f "$dir/netns" ]; then
        while read -r ns; do
            ip netns del "$ns" 2>/dev/null || true
        done <"$dir/netns"
    fi
    shm=$(shm_left)
    if [ -n "$shm" ]; then
        echo "cluster.sh: removing from /dev/shm: $shm"
        for f in $shm; do rm -f "/dev/shm/$f"; done
        left=1
    fi
    rm -rf "$dir"
    exit $left
    ;;
esac

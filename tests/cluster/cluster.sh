#!/bin/bash
# A cluster of N nodes on this machine, for the tests that need ranks on
# different nodes (tests/cluster/README.md).
#
#   cluster.sh up NODES [DIR]    make the nodes' files in DIR (default
#                                /tmp/collar-cluster): launchers in DIR/bin
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
# MPICH_LAUNCHER / OMPI_LAUNCHER name another real launcher (the wheel's
# mpiexec, say).
#
# Traffic between the nodes stays on loopback: Open MPI's TCP transports
# are held to lo, Hydra binds to lo and UCX uses lo; no other address is
# ever a target.  Every process started on a node carries
# CLUSTER_JOB_DIR=DIR in its environment, by which `down` finds what is
# left.
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

if [ "$cmd" = up ]; then
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

# The processes of the cluster: their environment names DIR.
cluster_pids() {
    local p
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" != "$$" ] || continue
        grep -qazxF "CLUSTER_JOB_DIR=$dir" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
    done
    return 0
}

shm_left() {
    [ -f "$dir/shm.before" ] || return 0
    # shellcheck disable=SC2010
    ls /dev/shm 2>/dev/null | grep '^collar-' | sort | comm -13 "$dir/shm.before" - || true
}

case $cmd in
up)
    [ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (namespaces, mounts)" >&2; exit 1; }
    command -v unshare >/dev/null || { echo "cluster.sh: needs unshare (util-linux)" >&2; exit 1; }
    if [ -d "$dir" ] && [ -n "$(cluster_pids)" ]; then
        echo "cluster.sh: processes of $dir still run; cluster.sh down $dir first" >&2
        exit 1
    fi
    rm -rf "$dir"
    mkdir -p "$dir/bin"
    cp /etc/hosts "$dir/hosts"
    : >"$dir/hostfile"
    hostlist=""
    for k in $(seq 1 "$nodes"); do
        printf '127.0.10.%d cnode%d\n' "$k" "$k" >>"$dir/hosts"
        printf 'cnode%d slots=64\n' "$k" >>"$dir/hostfile"
        hostlist="$hostlist${hostlist:+,}cnode$k"
    done
    echo "$nodes" >"$dir/nodes"
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
exec env -i PATH="\$PATH" HOME="\${HOME:-/root}" CLUSTER_JOB_DIR="$dir" \\
    unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' "\$host" "\$*"
EOF
    chmod +x "$dir/agent"

    # on_node1 COMMAND...: the launcher's own place, the first node, with
    # the cluster's /etc/hosts.
    cat >"$dir/bin/on-node1" <<EOF
#!/bin/sh
exec env CLUSTER_JOB_DIR="$dir" unshare --uts --mount /bin/sh -c \\
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
real=\${OMPI_LAUNCHER:-\$(command -v mpirun.openmpi || command -v mpirun)}
case " \$* " in *" --version "*) exec "\$real" --version ;; esac
. "$dir/bin/ppn.sh"
# (The cluster runs as root: namespaces and mounts.)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$dir/bin/on-node1" "\$real" --hostfile "$dir/hostfile" \\
    --mca plm_rsh_agent "$dir/agent" --mca plm_rsh_no_tree_spawn 1 \\
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \\
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
exec "$dir/bin/on-node1" env UCX_NET_DEVICES=lo "\$real" -hosts "\$hosts" \\
    -launcher ssh -launcher-exec "$dir/agent" -iface lo "\$@"
EOF
    chmod +x "$dir/bin/mpirun" "$dir/bin/mpiexec"
    echo "cluster.sh: $nodes nodes (cnode1..cnode$nodes) in $dir; launchers $dir/bin/mpirun, $dir/bin/mpiexec"
    ;;
check)
    left=0
    pids=$(cluster_pids)
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
    pids=$(cluster_pids)
    if [ -n "$pids" ]; then
        echo "cluster.sh: stopping processes left on the nodes: $pids"
        # shellcheck disable=SC2086
        kill -TERM $pids 2>/dev/null || true
        sleep 1
        pids=$(cluster_pids)
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        left=1
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

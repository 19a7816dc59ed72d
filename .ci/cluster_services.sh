#!/usr/bin/env bash
# Real cluster services on this one machine for the tests under tests/cluster/real/:
#
#   bash .ci/cluster_services.sh start [slurm] [sge] [ssh] [netns]   (all four by default)
#   bash .ci/cluster_services.sh stop                           (everything this script started)
#   bash .ci/cluster_services.sh status
#
# slurm: munged, slurmctld and slurmd (Debian's slurm-wlm packages), one node with this
#        machine's cores in partition "normal" and a partition "down" (State=DOWN) whose
#        jobs never start; the configuration lives in $STATE/slurm (SLURM_CONF), /etc/slurm
#        is not touched.  No cgroups: proctrack/linuxproc, task/none.
# sge:   sge_qmaster and sge_execd (Debian's gridengine-master, -exec, -client 8.1.9) in
#        Debian's cell $SGE_ROOT/default (/var/lib/gridengine), one execution host with this
#        machine's cores in queue all.q.  Grid Engine's own configuration is set for it:
#        host_aliases, act_qmaster, the global configuration, the scheduler's and all.q's
#        (see start_sge); nothing outside $SGE_ROOT and Grid Engine's spool is touched.
# ssh:   an sshd on 127.0.0.1:$SSH_PORT with a host key and a client key made here,
#        root login by that key only.
# netns: iproute2 only (nothing to start); checks that `ip netns add` works here.
#
# Packages are installed with apt-get when missing (root, Debian).  Every daemon started
# is recorded in $STATE/pids; `stop` ends exactly those, by pid, and removes the network
# namespaces whose names start with "dsk" (the prefix of the tests).  `start` is
# idempotent: a service already running from $STATE is left alone.
set -euo pipefail

STATE="${DISTSKETCH_SERVICES_DIR:-/tmp/distsketch-services}"
SSH_PORT="${DISTSKETCH_SSH_PORT:-2222}"
PIDS="$STATE/pids"

say() { echo "cluster_services: $*" >&2; }
die() { say "$*"; exit 1; }

# apt-get install of the packages whose commands are missing; services are not started by
# the packages' scripts (policy-rc.d refuses), this script starts them itself
install_packages() {
  local missing=()
  local cmd pkg
  while [ $# -gt 0 ]; do
    cmd="$1"; pkg="$2"; shift 2
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root (apt-get)"
  command -v apt-get >/dev/null || die "no apt-get here: install ${missing[*]} by hand"
  local policy=/usr/sbin/policy-rc.d created=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  say "apt-get install ${missing[*]}"
  local start=$SECONDS status=0
  {
    # the package lists may be stale on a fresh machine: update once, then install
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
      >"$STATE/apt.log" 2>&1 ||
      { apt-get update -q >>"$STATE/apt.log" 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
          "${missing[@]}" >>"$STATE/apt.log" 2>&1; }
  } || status=$?
  [ "$created" -eq 1 ] && rm -f "$policy"
  [ "$status" -eq 0 ] || { tail -20 "$STATE/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
  say "installed ${missing[*]} in $((SECONDS - start)) s"
}

# the pid of a recorded daemon if it still runs
running() {
  local pid
  pid="$(awk -v n="$1" '$1 == n {print $2}' "$PIDS" 2>/dev/null | tail -1)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

record() { echo "$1 $2" >>"$PIDS"; }

# wait up to $2 seconds for command $1 to succeed
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1" >/dev/null 2>&1; do
    [ $SECONDS -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

start_munge() {
  [ -n "$(running munged)" ] && return 0
  install -d -o munge -g munge -m 0755 /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 ||
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; }
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid \
    || die "munged did not start (see /var/log/munge/munged.log)"
  wait_for "[ -s /run/munge/munged.pid ]" 10 || die "munged wrote no pid file"
  record munged "$(cat /run/munge/munged.pid)"
  wait_for "munge -n | unmunge" 10 || die "munge does not answer (munge -n | unmunge)"
}

write_slurm_conf() {
  local host cpus mem
  host="$(hostname -s)"
  cpus="$(nproc --all)"
  # MB the node offers: a little under what the machine has (jobs ask for --mem)
  mem="$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
  mkdir -p "$STATE/slurm/state" "$STATE/slurm/spool" "$STATE/slurm/log"
  cat >"$STATE/slurm/slurm.conf" <<EOF
# one node, this machine; written by .ci/cluster_services.sh
ClusterName=distsketch
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=$STATE/slurm/state
SlurmdSpoolDir=$STATE/slurm/spool
SlurmctldPidFile=$STATE/slurm/slurmctld.pid
SlurmdPidFile=$STATE/slurm/slurmd.pid
SlurmctldLogFile=$STATE/slurm/log/slurmctld.log
SlurmdLogFile=$STATE/slurm/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# a finished job's state and exit code stay in \`scontrol show job\` for 5 minutes
# (squeue lists only pending and running jobs whatever this is)
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=normal Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=down Nodes=$host MaxTime=INFINITE State=DOWN
EOF
}

start_slurm() {
  install_packages slurmctld slurmctld slurmd slurmd sbatch slurm-client munged munge
  start_munge
  export SLURM_CONF="$STATE/slurm/slurm.conf"
  if [ -n "$(running slurmctld)" ] && [ -n "$(running slurmd)" ]; then
    say "slurm already running (SLURM_CONF=$SLURM_CONF)"; return 0
  fi
  write_slurm_conf
  # -i: ignore state left by an earlier run of this script; -c: start with an empty queue
  /usr/sbin/slurmctld -c -i -f "$SLURM_CONF" || die "slurmctld did not start: $(tail -5 "$STATE/slurm/log/slurmctld.log")"
  wait_for "[ -s '$STATE/slurm/slurmctld.pid' ]" 15 || die "slurmctld wrote no pid file"
  record slurmctld "$(cat "$STATE/slurm/slurmctld.pid")"
  /usr/sbin/slurmd -f "$SLURM_CONF" || die "slurmd did not start: $(tail -5 "$STATE/slurm/log/slurmd.log")"
  wait_for "[ -s '$STATE/slurm/slurmd.pid' ]" 15 || die "slurmd wrote no pid file"
  record slurmd "$(cat "$STATE/slurm/slurmd.pid")"
  wait_for "sinfo -h -p normal -t idle -o %n | grep -q ." 30 ||
    die "the node did not become idle: $(sinfo -N -l 2>&1; tail -5 "$STATE/slurm/log/slurmd.log")"
  say "slurm up: SLURM_CONF=$SLURM_CONF"
  sinfo >&2
}

SGE_ROOT="${SGE_ROOT:-/var/lib/gridengine}"
SGE_CELL="${SGE_CELL:-default}"
export SGE_ROOT SGE_CELL

# Grid Engine's configuration as `qconf -s...` prints it, with "key value" lines replaced
sge_edit() {
  local file="$1"; shift
  local kv
  for kv in "$@"; do
    sed -i "s|^${kv%% *} .*|$kv|" "$file"
  done
}

start_sge() {
  install_packages sge_qmaster gridengine-master sge_execd gridengine-exec qsub gridengine-client
  local common="$SGE_ROOT/$SGE_CELL/common" host addr names spool cfg
  [ -s "$common/bootstrap" ] || die "no Grid Engine cell in $SGE_ROOT/$SGE_CELL (gridengine-master's setup did not run)"
  if [ -n "$(running sge_qmaster)" ] && [ -n "$(running sge_execd)" ]; then
    say "sge already running (SGE_ROOT=$SGE_ROOT)"; return 0
  fi
  host="$(hostname)"
  # Grid Engine's commlib refuses a client whose address resolves to a name other than the
  # one it calls itself: here 127.0.0.1 is "localhost" (and other names) as well as this
  # host's name.  host_aliases (Grid Engine's own file) makes them one host; act_qmaster
  # names the master by the same name (Debian's setup writes "localhost" there).
  addr="$(getent ahostsv4 "$host" | awk 'NR == 1 {print $1}')"
  names="$(awk -v a="$addr" -v h="$host" '$1 == a {for (i = 2; i <= NF; i++) if ($i != h) printf " %s", $i}' /etc/hosts)"
  [ "$addr" = 127.0.0.1 ] && case " $names " in *" localhost "*) ;; *) names="$names localhost" ;; esac
  if [ -n "$names" ]; then echo "$host$names" >"$common/host_aliases"; fi
  echo "$host" >"$common/act_qmaster"
  spool="$(awk '$1 == "qmaster_spool_dir" {print $2}' "$common/bootstrap")"
  rm -f "$spool/qmaster.pid"  # left by the package's setup or an earlier run
  /usr/sbin/sge_qmaster || die "sge_qmaster did not start: $(tail -5 "$spool/messages")"
  wait_for "[ -s '$spool/qmaster.pid' ] && kill -0 \$(cat '$spool/qmaster.pid')" 15 ||
    die "sge_qmaster wrote no pid file: $(tail -5 "$spool/messages")"
  record sge_qmaster "$(cat "$spool/qmaster.pid")"
  wait_for "qstat" 30 || die "qstat is refused: $(qstat 2>&1 | tail -3)"
  cfg="$STATE/sge"
  rm -rf "$cfg" && mkdir -p "$cfg"
  qconf -sh | grep -qx "$host" || qconf -ah "$host" >/dev/null
  qconf -ss 2>/dev/null | grep -qx "$host" || qconf -as "$host" >/dev/null
  # the tests submit as root: Debian's minimum uid/gid for jobs is 1000
  qconf -sconf global >"$cfg/global"
  sge_edit "$cfg/global" "min_uid 0" "min_gid 0"
  qconf -Mconf "$cfg/global" >/dev/null
  # schedule every second instead of every 15 s; no load adjustment per job started
  qconf -ssconf >"$cfg/scheduler"
  sge_edit "$cfg/scheduler" "schedule_interval 0:0:1" "flush_submit_sec 1" \
    "flush_finish_sec 1" "job_load_adjustments NONE"
  qconf -Msconf "$cfg/scheduler" >/dev/null
  # all.q: this host's cores; no load threshold (a shared machine's load would put the
  # queue into alarm and start nothing), no parallel environments, jobs run by bash
  qconf -sq >"$cfg/all.q"
  sge_edit "$cfg/all.q" "qname all.q" "hostlist $host" "slots $(nproc --all)" \
    "load_thresholds NONE" "pe_list NONE" "shell /bin/bash"
  if qconf -sql 2>/dev/null | grep -qx all.q; then
    qconf -Mq "$cfg/all.q" >/dev/null
  else
    qconf -Aq "$cfg/all.q" >/dev/null
  fi
  # jobs left by an earlier run of this script
  qdel -f -u root >/dev/null 2>&1 || true
  spool="$(qconf -sconf global | awk '$1 == "execd_spool_dir" {print $2}')"
  rm -f "$spool"/*/execd.pid
  # sge_execd reads the global configuration when it starts: after the change above
  /usr/sbin/sge_execd || die "sge_execd did not start"
  wait_for "ls $spool/*/execd.pid" 15 || die "sge_execd wrote no pid file"
  record sge_execd "$(cat "$(ls -t "$spool"/*/execd.pid | head -1)")"
  qmod -cq all.q >/dev/null 2>&1 || true  # an error state left by an earlier run
  wait_for "qstat -f -q all.q | awk '\$1 == \"all.q@$host\" && NF == 5 {ok = 1} END {exit !ok}'" 60 ||
    die "queue all.q@$host is not available: $(qstat -f 2>&1)"
  say "sge up: SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL"
  qstat -f >&2
}

start_ssh() {
  install_packages sshd openssh-server ssh openssh-client
  [ -n "$(running sshd)" ] && { say "sshd already running on 127.0.0.1:$SSH_PORT"; return 0; }
  local d="$STATE/ssh"
  mkdir -p "$d" /run/sshd && chmod 0700 "$d"
  [ -s "$d/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$d/host_ed25519"
  [ -s "$d/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$d/client_ed25519"
  cp "$d/client_ed25519.pub" "$d/authorized_keys" && chmod 0600 "$d/authorized_keys"
  echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$d/host_ed25519.pub")" >"$d/known_hosts"
  cat >"$d/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $d/host_ed25519
PidFile $d/sshd.pid
AuthorizedKeysFile $d/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv DASK_* DISTSKETCH_*
EOF
  /usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log" || die "sshd did not start: $(tail -5 "$d/sshd.log")"
  wait_for "[ -s '$d/sshd.pid' ]" 10 || die "sshd wrote no pid file"
  record sshd "$(cat "$d/sshd.pid")"
  wait_for "ssh -p $SSH_PORT -i $d/client_ed25519 -o UserKnownHostsFile=$d/known_hosts -o BatchMode=yes root@127.0.0.1 true" 10 ||
    die "sshd does not accept the test key: $(tail -5 "$d/sshd.log")"
  say "sshd up on 127.0.0.1:$SSH_PORT (key $d/client_ed25519, known_hosts $d/known_hosts)"
}

start_netns() {
  install_packages ip iproute2
  ip netns add dsk-probe 2>"$STATE/netns.err" || die "ip netns add fails here: $(cat "$STATE/netns.err")"
  ip netns del dsk-probe
  say "network namespaces work"
}

stop_all() {
  local name pid
  # the jobs first: their processes outlive slurmd and sge_execd
  if [ -n "$(running slurmctld)" ]; then
    export SLURM_CONF="$STATE/slurm/slurm.conf"
    scancel --quiet --user=root 2>/dev/null || true
    wait_for '[ -z "$(squeue -h)" ]' 30 || say "jobs still in the queue: $(squeue -h)"
  fi
  if [ -n "$(running sge_qmaster)" ]; then
    qdel -u root >/dev/null 2>&1 || true
    wait_for '[ -z "$(qstat -u root)" ]' 30 || { qdel -f -u root >/dev/null 2>&1 || true; }
  fi
  if [ -s "$PIDS" ]; then
    # newest first: slurmd before slurmctld before munged
    tac "$PIDS" | while read -r name pid; do
      kill -0 "$pid" 2>/dev/null || continue
      kill "$pid" 2>/dev/null || true
      # up to 20 s: sge_qmaster writes its spool before it exits
      for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
      say "stopped $name ($pid)"
    done
    rm -f "$PIDS"
  fi
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^dsk/ {print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" && say "removed network namespace $ns"
  done
}

mkdir -p "$STATE"
case "${1:-}" in
  start)
    shift
    [ $# -gt 0 ] || set -- slurm sge ssh netns
    for what in "$@"; do
      case "$what" in
        slurm) start_slurm ;;
        sge) start_sge ;;
        ssh) start_ssh ;;
        netns) start_netns ;;
        *) die "unknown service $what (slurm, sge, ssh, netns)" ;;
      esac
    done
    ;;
  stop) stop_all ;;
  status)
    for name in munged slurmctld slurmd sge_qmaster sge_execd sshd; do
      pid="$(running "$name" || true)"
      echo "$name ${pid:-not running}"
    done
    ;;
  *) die "usage: $0 start [slurm] [sge] [ssh] [netns] | stop | status" ;;
esac

#!/usr/bin/env bash
# Real Slurm (Debian's slurmctld + slurmd + munge) on localhost: `sbatch --array=0-3` of
# `voxseg batch` shards over a manifest of generated DICOM studies. Every case must be done
# exactly once, by one shard, with label maps byte-identical to a single-process run.
#
# Usage: slurm_array_test.sh <voxseg binary> <source dir>      (ctest label: slow)
# Exits 77 (skipped) when the Slurm/munge daemons are not installed (scripts/deps.sh installs
# them). Everything lives in a temporary folder: a generated munge key, slurm.conf (SLURM_CONF),
# state, spool, logs and pid files. Nothing under /etc, /var or /run is written; the daemons run
# as the current user on free ports and are stopped on exit.
set -euo pipefail
VOXSEG=$(readlink -f "$1")
SRC=$(readlink -f "$2")
CASES=${VOXSEG_SLURM_TEST_CASES:-8}
for tool in munged slurmctld slurmd sbatch sinfo squeue; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "SKIP: $tool not installed (scripts/deps.sh installs slurmctld slurmd munge)"; exit 77
  fi
done
export PATH="$PATH:/usr/sbin"

T=$(mktemp -d /tmp/voxseg-slurm.XXXXXX)
chmod 755 "$T"
cleanup() {
  set +e
  for pidfile in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munged.pid"; do
    [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  done
  sleep 1
  for pidfile in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munged.pid"; do
    [ -s "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null
  done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$T"/logs/* "$T"/slurmctld.log "$T"/slurmd.log; do
    [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }
  done
  exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge with its own key and socket.
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/logs"
chmod 700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.sock" \
  --pid-file="$T/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed"

HOST=$(hostname -s)
USER_NAME=$(id -un)
CPUS=$(nproc)
cat >"$T/slurm.conf" <<CONF
ClusterName=voxsegtest
SlurmctldHost=$HOST
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
PlugStackConfig=$T/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
: >"$T/plugstack.conf"
export SLURM_CONF="$T/slurm.conf"
slurmctld -i
slurmd
for _ in $(seq 60); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || fail "Slurm node not idle (state: '${state:-none}')"
echo "slurm up: node $HOST idle"

# Studies (synthetic CT DICOM series, different noise seeds) and the golden tiny model.
mkdir -p "$T/studies" "$T/model"
echo "case_id,input" >"$T/cases.csv"
for i in $(seq 0 $((CASES - 1))); do
  "$VOXSEG" synth "$T/studies/s$i" --size 48x40x20 --spacing 1.2x1.1x2.0 --seed $((i + 1)) --quiet
  echo "study-$i,studies/s$i" >>"$T/cases.csv"
done
cp "$SRC/tests/engine/golden/nnunet_plain.onnx" "$T/model/model.onnx"
SHA=$(sha256sum "$T/model/model.onnx" | cut -d' ' -f1)
cat >"$T/model/model.json" <<JSON
{"name": "test-net", "version": "0.1", "license": "MIT", "description": "golden PlainConvUNet",
 "channels": [{"modality": "CT", "normalization": {"scheme": "ct", "clip": [-1000, 1000],
   "mean": 0, "std": 300}}],
 "spacing_mm": [2.0, 2.0, 2.0], "patch_size": [16, 24, 20], "axis_order": "zyx",
 "orientation": "native",
 "labels": [{"value": 1, "name": "one", "color": [255, 0, 0]},
            {"value": 2, "name": "two", "color": [0, 255, 0]}],
 "output": "softmax",
 "inference": {"overlap": 0.5, "gaussian_sigma_scale": 0.125, "mirror_axes": []},
 "sha256": "$SHA"}
JSON
ARGS=(-m "$T/model" --device cpu --threads 1 --outputs nifti,stats --quiet)

# The single-process reference.
"$VOXSEG" batch "$T/cases.csv" -o "$T/reference" "${ARGS[@]}" || fail "reference run failed"

# The array job: each task is one shard (SLURM_ARRAY_TASK_ID of SLURM_ARRAY_TASK_COUNT).
cat >"$T/job.sh" <<JOB
#!/bin/bash
exec "$VOXSEG" batch "$T/cases.csv" -o "$T/out" ${ARGS[*]}
JOB
chmod +x "$T/job.sh"
sbatch --wait --array=0-3 --cpus-per-task=1 --output="$T/logs/%A_%a.out" \
  --chdir="$T" "$T/job.sh" >"$T/sbatch.out" || fail "sbatch --wait reported a failed task"
echo "$(cat "$T/sbatch.out"): array 0-3 finished"

# Every case exactly once, each shard's journal and summary present, outputs identical.
python3 - "$T" "$CASES" <<'PY' || fail "journal check"
import json, sys, pathlib
t, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
state = t / "out/.voxseg-batch"
owners = {}
for i in range(4):
    journal = state / f"journal-{i}-of-4.jsonl"
    summary = json.loads((state / f"summary-{i}-of-4.json").read_text())
    assert summary["counts"]["failed"] == 0, summary
    assert summary["stopped"] is None, summary
    for line in journal.read_text().splitlines():
        e = json.loads(line)
        assert e["state"] == "done", e
        owners.setdefault(e["case_id"], []).append(i)
    print(f"shard {i}/4: {summary['counts']['done']} done")
expected = {f"study-{i}" for i in range(n)}
assert set(owners) == expected, (sorted(owners), sorted(expected))
twice = {c: s for c, s in owners.items() if len(s) != 1}
assert not twice, f"cases done more than once: {twice}"
print(f"{n} cases, each done exactly once")
PY
for i in $(seq 0 $((CASES - 1))); do
  cmp "$T/reference/study-$i/segmentation.nii.gz" "$T/out/study-$i/segmentation.nii.gz" ||
    fail "study-$i: label map differs from the single-process run"
done
leftover=$(find "$T/out" \( -name '*tmp*' -o -name '.voxseg-staging*' \) | head -1)
[ -z "$leftover" ] || fail "temporary file left: $leftover"
[ -z "$(ls -A "$T/out/.voxseg-batch/staging")" ] || fail "staging not empty"
echo "PASS: $CASES cases over 4 Slurm array tasks, label maps identical to one process"

#!/usr/bin/env bash
# The container image of deploy/Dockerfile, run for real by a docker daemon: voxseg runs as user
# 10001, `voxseg batch` segments generated CT studies from read-only mounts, `docker stop` in the
# middle of the batch stops it cleanly (exit 10, no staging debris, finished cases kept), and the
# rerun completes every case with label maps byte-identical to the host build's batch.
#
# Usage: docker_image_test.sh <voxseg binary> <source dir>       (ctest label: slow)
# Exits 77 (skipped) when no docker daemon answers or the image is not built. Build it first
# (a CPU-only image works where NVIDIA's registry is out of reach; docs/deploy.md):
#   docker build -f deploy/Dockerfile -t voxseg:cpu-test --build-arg BUILD_IMAGE=debian:bookworm \
#       --build-arg RUNTIME_IMAGE=debian:bookworm --build-arg WITH_CUDA=OFF .
# The image tag comes from $VOXSEG_TEST_IMAGE (default voxseg:cpu-test). Everything it writes
# lives in a temporary folder; the container is removed on exit.
set -euo pipefail
VOXSEG=$(readlink -f "$1")
SRC=$(readlink -f "$2")
IMAGE=${VOXSEG_TEST_IMAGE:-voxseg:cpu-test}
CASES=4
command -v docker >/dev/null 2>&1 || { echo "SKIP: no docker client"; exit 77; }
docker info >/dev/null 2>&1 || { echo "SKIP: no docker daemon answers"; exit 77; }
docker image inspect "$IMAGE" >/dev/null 2>&1 ||
  { echo "SKIP: image $IMAGE not built (see the header of this script)"; exit 77; }

T=$(mktemp -d /tmp/voxseg-docker.XXXXXX)
NAME="voxseg-test-$$"
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  # The container's user 10001 owns what it wrote; remove through a container-free path.
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; docker logs "$NAME" 2>&1 | tail -20 || true; exit 1; }

# Inputs: generated CT phantom studies (DICOM), a host manifest and the same with container paths.
mkdir -p "$T/data" "$T/out" "$T/host-out"
echo "case_id,input" >"$T/data/host.csv"
echo "case_id,input" >"$T/data/container.csv"
for n in $(seq 1 "$CASES"); do
  "$VOXSEG" phantom "$T/data/case$n" --seed $((700 + n)) --size 192x192x100 --outputs dicom \
    --quiet >/dev/null
  echo "case$n,$T/data/case$n/dicom" >>"$T/data/host.csv"
  echo "case$n,/data/case$n/dicom" >>"$T/data/container.csv"
done
chmod -R a+rX "$T/data"
chmod 777 "$T/out"  # the container user (10001) writes here
MODEL="$SRC/sample_data/models/ct-phantom"
common=(--device cpu --threads 2 --outputs nifti,stats)

# 1. The image runs voxseg as the fixed non-root user.
[ "$(docker run --rm --entrypoint id "$IMAGE" -u)" = 10001 ] || fail "container user is not 10001"
docker run --rm "$IMAGE" --version | grep -q '^voxseg ' || fail "voxseg --version failed"

# 2. A batch stopped by `docker stop` (SIGTERM, then SIGKILL after 60 s) after its first case.
docker run -d --name "$NAME" -v "$T/data:/data:ro" -v "$MODEL:/model:ro" -v "$T/out:/out" \
  "$IMAGE" --log-format json batch /data/container.csv -m /model -o /out "${common[@]}" \
  --grace 30 >/dev/null
# Distinct cases recorded as done in the journals.
journal_lines() {
  cat "$T"/out/.voxseg-batch/journal-*.jsonl 2>/dev/null | grep '"state":"done"' |
    grep -o '"case_id":"[^"]*"' | sort -u | wc -l
}
for _ in $(seq 1 600); do
  [ "$(journal_lines)" -ge 1 ] && break
  [ "$(docker inspect -f '{{.State.Running}}' "$NAME")" = true ] || fail "batch ended early"
  sleep 0.2
done
[ "$(journal_lines)" -ge 1 ] || fail "no case finished within 120 s"
docker stop -t 60 "$NAME" >/dev/null
code=$(docker wait "$NAME")
done_after_stop=$(journal_lines)
echo "stopped after $done_after_stop of $CASES cases, exit code $code"
[ "$code" = 10 ] || [ "$done_after_stop" = "$CASES" ] ||
  fail "stopped batch exited with $code (10 expected)"
[ -z "$(ls -A "$T/out/.voxseg-batch/staging" 2>/dev/null)" ] || fail "staging debris left"
find "$T/out" -name '.tmp-*' | grep -q . && fail "temporary files left"
docker rm "$NAME" >/dev/null

# 3. The rerun does the rest and exits 0.
docker run --name "$NAME" -v "$T/data:/data:ro" -v "$MODEL:/model:ro" -v "$T/out:/out" \
  "$IMAGE" --quiet batch /data/container.csv -m /model -o /out "${common[@]}" ||
  fail "rerun exited with $?"
[ "$(journal_lines)" = "$CASES" ] || fail "$(journal_lines) done records, $CASES expected"

# 4. Same label maps as the host build's batch.
"$VOXSEG" --quiet batch "$T/data/host.csv" -m "$MODEL" -o "$T/host-out" "${common[@]}"
for n in $(seq 1 "$CASES"); do
  cmp -s "$T/out/case$n/segmentation.nii.gz" "$T/host-out/case$n/segmentation.nii.gz" ||
    fail "case$n: container and host label maps differ"
done
echo "PASS: $CASES cases; stop after $done_after_stop, exit $code; rerun complete; labels identical"

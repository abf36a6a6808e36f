#!/usr/bin/env bash
# The container image of deploy/Dockerfile, built from this tree and run by a real docker daemon:
# voxseg runs as user 10001, `voxseg batch` segments generated CT studies (one of them converted
# to implicit VR, which needs DCMTK's data dictionary in the image) from read-only mounts,
# `docker stop` in the middle of the batch stops it cleanly (exit 10, no staging debris, finished
# cases kept), and the rerun completes every case with label maps byte-identical to the host
# build's batch.
#
# Usage: docker_image_test.sh <voxseg binary> <source dir>       (ctest label: slow)
# Exits 77 (skipped) when no docker daemon answers or the base image is missing. The image is
# built CPU-only on $VOXSEG_TEST_BASE (default debian:bookworm: any Debian 12 image, e.g.
# `debootstrap --variant=minbase bookworm rootfs && tar -C rootfs -c . | docker import -
# debian:bookworm` where no registry is reachable); docker's layer cache makes a rebuild take
# seconds unless the sources the image builds from changed (then about 6 minutes on 2 cores). Everything the test
# writes lives in a temporary folder; the container is removed on exit.
set -euo pipefail
VOXSEG=$(readlink -f "$1")
SRC=$(readlink -f "$2")
BASE=${VOXSEG_TEST_BASE:-debian:bookworm}
IMAGE=voxseg:cpu-test
CASES=6
command -v docker >/dev/null 2>&1 || { echo "SKIP: no docker client"; exit 77; }
docker info >/dev/null 2>&1 || { echo "SKIP: no docker daemon answers"; exit 77; }
docker image inspect "$BASE" >/dev/null 2>&1 ||
  { echo "SKIP: base image $BASE not present (see the header of this script)"; exit 77; }
echo "building $IMAGE on $BASE"
docker build -q --network host -f "$SRC/deploy/Dockerfile" -t "$IMAGE" \
  --build-arg BUILD_IMAGE="$BASE" --build-arg RUNTIME_IMAGE="$BASE" --build-arg WITH_CUDA=OFF \
  "$SRC" >/dev/null || { echo "FAIL: docker build"; exit 1; }

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
# Case 1 in implicit VR little endian: no VRs in the file, DCMTK looks them up in its dictionary.
if command -v dcmconv >/dev/null 2>&1; then
  for f in "$T"/data/case1/dicom/*; do dcmconv +ti "$f" "$f.ivr" && mv "$f.ivr" "$f"; done
fi
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
  --grace 30 --prefetch 1 >/dev/null
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
[ "$code" = 10 ] || fail "stopped batch exited with $code (10 expected)"
[ "$done_after_stop" -lt "$CASES" ] || fail "every case finished before the stop: nothing tested"
[ -z "$(ls -A "$T/out/.voxseg-batch/staging" 2>/dev/null)" ] || fail "staging debris left"
find "$T/out" -name '.tmp-*' | grep -q . && fail "temporary files left"
docker logs "$NAME" 2>&1 | grep -q 'DcmDataDictionary' && fail "DCMTK's data dictionary is missing"
docker rm "$NAME" >/dev/null

# 3. The rerun does the rest and exits 0.
docker run --name "$NAME" -v "$T/data:/data:ro" -v "$MODEL:/model:ro" -v "$T/out:/out" \
  "$IMAGE" --quiet batch /data/container.csv -m /model -o /out "${common[@]}" ||
  fail "rerun exited with $?"
[ "$(journal_lines)" = "$CASES" ] || fail "$(journal_lines) done records, $CASES expected"
docker logs "$NAME" 2>&1 | grep -q 'DcmDataDictionary' && fail "DCMTK's data dictionary is missing"

# 4. Same label maps as the host build's batch.
"$VOXSEG" --quiet batch "$T/data/host.csv" -m "$MODEL" -o "$T/host-out" "${common[@]}"
for n in $(seq 1 "$CASES"); do
  cmp -s "$T/out/case$n/segmentation.nii.gz" "$T/host-out/case$n/segmentation.nii.gz" ||
    fail "case$n: container and host label maps differ"
done
echo "PASS: $CASES cases; stop after $done_after_stop, exit $code; rerun complete; labels identical"

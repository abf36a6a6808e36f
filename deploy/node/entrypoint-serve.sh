#!/bin/sh
# Container entry point of the voxseg DICOM node (deploy/Dockerfile's image):
#   docker run -d --name voxseg-node -p 11112:11112 -p 9110:9110 \
#     -v /etc/voxseg:/etc/voxseg:ro -v voxseg-spool:/var/lib/voxseg \
#     --stop-timeout 90 --entrypoint /opt/voxseg/bin/entrypoint-serve.sh voxseg
# Checks the configuration first (a bad key stops the container with the key's name), then
# execs voxseg so that it is PID 1 and receives `docker stop`'s SIGTERM itself.
# VOXSEG_NODE_CONFIG (default /etc/voxseg/node.json) and VOXSEG_GRACE (default 60 s, keep it
# below --stop-timeout) change the defaults; extra arguments go to `voxseg serve`.
set -eu
config="${VOXSEG_NODE_CONFIG:-/etc/voxseg/node.json}"
if [ ! -r "$config" ]; then
  echo "voxseg node: no configuration at $config: mount one (-v /etc/voxseg:/etc/voxseg:ro) or set VOXSEG_NODE_CONFIG" >&2
  exit 3
fi
voxseg serve --config "$config" --check
exec voxseg serve --config "$config" --grace "${VOXSEG_GRACE:-60}" --log-format json "$@"

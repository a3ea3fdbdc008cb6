#!/usr/bin/env bash
# The Kafka sides of the calibration cases (docs/calibration.md, "The cases"), by name, one
# after another on the local cluster, each into results/calib/NAME/kafka. A name ending in
# -44 runs on Kafka 4.4.0 with the 4.4 preset; the others on Kafka 4.1.1. A sweep cut short
# resumes: the same command carries on; one kept unfinished in calibration/ is put back first
# with `python benchmarks/keep_side.py --resume calibration/MACHINE/NAME results/calib/NAME/kafka`.
# Compare a side with the model afterwards with `eosim calibrate` and the same arguments
# (docs/calibration.md, "How a comparison is made").
#
#   bash benchmarks/real_sides.sh case3w case2w      # cases 3 and 2 on Kafka 4.1.1
#   bash benchmarks/real_sides.sh --print case4w-44  # the command only
set -euo pipefail
cd "$(dirname "$0")/.."

print=0
if [ "${1:-}" = "--print" ]; then print=1; shift; fi
[ $# -gt 0 ] || { echo "usage: real_sides.sh [--print] NAME..." >&2; exit 2; }

S=scenarios/calibration
for name in "$@"; do
  base=${name%-44}
  case "$base" in
    case1w) args=("$S/acks-leader-kill.yaml" --grid producers.0.config.acks=all,1) ;;
    case2w) args=("$S/min-isr-unclean.yaml"
                  --grid cluster.topics.0.config.min.insync.replicas=1,2
                  --grid cluster.topics.0.config.unclean.leader.election.enable=false,true) ;;
    case3w) args=("$S/idempotence-restarts.yaml" --grid producers.0.config.enable.idempotence=true,false) ;;
    case4w) args=("$S/transactions-coordinator-kill.yaml") ;;
    case5w) args=("$S/steady-timing.yaml" --grid producers.0.config.acks=all,1
                  --set producers.0.config.enable.idempotence=false) ;;
    case7w) args=("$S/slow-follower.yaml") ;;
    *) echo "real_sides.sh: unknown case '$name' (case1w..case5w, case7w, each with -44)" >&2; exit 2 ;;
  esac
  if [ "$name" != "$base" ]; then
    args+=(--kafka-version 4.4.0 --set kafka.version=4.4)
  fi
  cmd=(eosim sweep "${args[@]}" --runs 20 --target kafka --out "results/calib/$name/kafka" --quiet)
  echo "$(date -u +%FT%TZ) $name: ${cmd[*]}"
  [ "$print" = 1 ] && continue
  rc=0
  "${cmd[@]}" || rc=$?
  echo "$(date -u +%FT%TZ) $name: exit $rc"
done

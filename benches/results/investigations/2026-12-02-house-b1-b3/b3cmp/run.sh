#!/usr/bin/env bash
# B3 of the code before this session's house work (c406e32) and after
# (0f5fae2), alternating, in one process run each, on one machine.
export GPU_BACKEND=cuda
cd "$(dirname "$0")"
for round in 1 2 3; do
  for which in old new; do
    echo "=== round $round: $which"
    CRITERION_HOME=$(mktemp -d) ./bench-$which --bench '^B3/' 2>&1 | grep -E '^B3/|time:'
  done
done

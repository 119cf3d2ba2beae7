#!/bin/bash
#SBATCH --job-name=a10g-check
#SBATCH --gpus=a10g:1
#SBATCH --time=00:02:00
# Which GPU did the job get?  Only the testbed's `cloud` cluster has a10g,
# so tenbin places this job there.  The testbed's GPUs are fake (their
# device files are /dev/null) and its nodes have no nvidia-smi, so the
# script says so instead of failing with exit 127.
set -eu
echo "$SLURMD_NODENAME: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
else
  echo "no nvidia-smi on $SLURMD_NODENAME (a testbed node: its GPUs are fake)"
fi

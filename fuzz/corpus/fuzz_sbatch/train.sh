#!/bin/bash
#SBATCH --job-name=train
#SBATCH --gpus=h100:2
#SBATCH --cpus-per-task=4
#SBATCH --time=00:10:00
# A stand-in for a training run, written as a plain Slurm batch script:
# `tenbin sbatch examples/train.sh` turns the #SBATCH lines above into the
# job's settings (sbatch would read them the same way).  It runs as it is
# on the local Slurm testbed and on a real cluster.
set -eu
echo "$SLURM_JOB_NAME on $SLURM_CLUSTER_NAME: GPUs $CUDA_VISIBLE_DEVICES, $SLURM_CPUS_ON_NODE CPUs"
for epoch in 1 2 3; do
  sleep 1
  echo "epoch $epoch/3 done"
done

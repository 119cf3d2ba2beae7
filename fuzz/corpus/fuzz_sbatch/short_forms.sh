#!/bin/sh
# comment

#SBATCH -J name -A proj -N 2 -G 4 -t 2:30
#SBATCH -o out-%j.log -e err-%j.log -D /work -H
#SBATCH --gres=gpu:a10g:1 --gpus-per-node=1
#SBATCH --export=NONE
#SBATCH --mem=4G --partition gpu
#SBATCH --comment "two words" --x='q'
echo done
#SBATCH --ignored

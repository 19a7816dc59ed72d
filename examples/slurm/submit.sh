#!/usr/bin/env bash
# The driver job of a distsketch run on SLURM: submit it from the login node,
#
#   sbatch examples/slurm/submit.sh /shared/data/X.npy
#
# It ingests the file once (skipped when the store exists), then runs the
# workflow in examples/slurm/skpca.yaml.  The Dask scheduler lives in this job;
# the workers are the jobs of examples/slurm/cluster.yaml, submitted by this
# job and cancelled when the run ends.  Rerunning after more rows were
# appended folds only the new rows into the sketch.  Options on the sbatch
# command line override the #SBATCH lines below (`sbatch --mem=8G ...`).
#SBATCH --job-name=distsketch-driver
#SBATCH --time=06:00:00
#SBATCH --cpus-per-task=2
#SBATCH --mem=16G
#SBATCH --output=distsketch-driver-%j.log
set -euo pipefail

here="${SLURM_SUBMIT_DIR:-$(pwd)}/examples/slurm"
source ~/venvs/distsketch/bin/activate

source_file="${1:?usage: sbatch examples/slurm/submit.sh DATA_FILE (svmlight, CSV, .npy, idx)}"
if [ ! -e "$here/data/X.zarr" ]; then
  distsketch ingest "$source_file" "$here/data/X.zarr"
fi
# --wait: queue behind a run of the same workflow that still holds its lock
distsketch run "$here/skpca.yaml" --cluster "$here/cluster.yaml" --wait 3600

#!/usr/bin/env bash

#PBS -N dask-worker
#PBS -q workq
#PBS -A proj42
#PBS -l select=1:ncpus=4:mem=8GB
#PBS -l walltime=01:00:00
export SWEEP_JOB_START=$(date +%s)
export SWEEP_JOB_END=$(( $(date +%s) + 3600 ))
PYTHON -m distributed.cli.dask_worker tls://SCHEDULER --name dummy-name --nthreads 4 --memory-limit 8.00GiB --nanny --death-timeout 60 --resources threads=4,memory=8589934592 --dashboard-address 127.0.0.1:0 --interface lo --protocol tls:// --tls-ca-file TLS_DIR/ca_file --tls-cert TLS_DIR/cert --tls-key TLS_DIR/key

#!/usr/bin/env bash

#$ -N dask-worker
#$ -q all.q
#$ -l h_vmem=8G
#$ -l h_rt=01:00:00
#$ -cwd
#$ -j y
export SWEEP_JOB_START=$(date +%s)
export SWEEP_JOB_END=$(( $(date +%s) + 3600 ))
PYTHON -m distributed.cli.dask_worker tls://SCHEDULER --name dummy-name --nthreads 4 --memory-limit 8.00GiB --nanny --death-timeout 60 --resources threads=4,memory=8589934592 --dashboard-address 127.0.0.1:0 --interface lo --protocol tls:// --tls-ca-file TLS_DIR/ca_file --tls-cert TLS_DIR/cert --tls-key TLS_DIR/key

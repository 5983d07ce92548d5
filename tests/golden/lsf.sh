#!/usr/bin/env bash

#BSUB -J dask-worker
#BSUB -q normal
#BSUB -P "proj42"
#BSUB -n 4
#BSUB -R "span[hosts=1]"
#BSUB -M 8589935
#BSUB -W 01:00:00
export SWEEP_JOB_START=$(date +%s)
export SWEEP_JOB_END=$(( $(date +%s) + 3600 ))
PYTHON -m distributed.cli.dask_worker tls://SCHEDULER --name dummy-name --nthreads 4 --memory-limit 8.00GiB --nanny --death-timeout 60 --resources threads=4,memory=8589934592 --dashboard-address 127.0.0.1:0 --interface lo --protocol tls:// --tls-ca-file TLS_DIR/ca_file --tls-cert TLS_DIR/cert --tls-key TLS_DIR/key

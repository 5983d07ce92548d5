#!/usr/bin/env bash

#OAR -n dask-worker
#OAR -q default
#OAR --project proj42
#OAR -l /nodes=1/core=4,walltime=01:00:00
export SWEEP_JOB_START=$(date +%s)
export SWEEP_JOB_END=$(( $(date +%s) + 3600 ))
PYTHON -m distributed.cli.dask_worker tls://SCHEDULER --name dummy-name --nthreads 4 --memory-limit 8.00GiB --nanny --death-timeout 60 --resources threads=4,memory=8589934592 --dashboard-address 127.0.0.1:0 --interface lo --protocol tls:// --tls-ca-file TLS_DIR/ca_file --tls-cert TLS_DIR/cert --tls-key TLS_DIR/key

#!/usr/bin/env condor_submit

MY.DaskWorkerName = "htcondor--$F(MY.JobId)--"
batch_name = dummy-name
RequestCpus = MY.DaskWorkerCores
RequestMemory = floor(MY.DaskWorkerMemory / 1048576)
RequestDisk = floor(MY.DaskWorkerDisk / 1024)
MY.JobId = "$(ClusterId).$(ProcId)"
MY.DaskWorkerCores = 4
MY.DaskWorkerMemory = 8589934592
MY.DaskWorkerDisk = 1073741824

Arguments = "-c 'PYTHON -m distributed.cli.dask_worker tls://SCHEDULER --name dummy-name --nthreads 4 --memory-limit 8.00GiB --nanny --death-timeout 60 --resources threads=4,memory=8589934592,disk=1073741824 --dashboard-address 127.0.0.1:0 --interface lo --protocol tls:// --tls-ca-file TLS_DIR/ca_file --tls-cert TLS_DIR/cert --tls-key TLS_DIR/key'"
Executable = /bin/sh

Queue

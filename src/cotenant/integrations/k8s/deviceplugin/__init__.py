"""The kubelet device plugin: advertises the node's GPUs (as milli shares, whole GPUs or MIG
instances) and hands each container the GPU the extender chose, with its MPS limits."""

"""The node core both kubelet front ends stand on: the served config of a node (config source -> plan)."""

"""gpuslice: a Kubernetes GPU device plugin, mock kubelet and GPU cluster scheduling simulator."""

__version__ = "0.1.0"

"""`gpuslice sim snapshot`: a live cluster's GPUs and pods, and what each packing policy would strand."""

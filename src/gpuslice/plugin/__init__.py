"""The device plugin: gRPC servers per resource, registration, kubelet-restart watch, health loop."""

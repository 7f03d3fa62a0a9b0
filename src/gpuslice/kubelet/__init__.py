"""A mock kubelet speaking the real device-plugin and pod-resources gRPC."""

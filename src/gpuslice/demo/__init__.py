"""The narrated walkthrough: the plugin and the mock kubelet over real gRPC in a temp dir."""

"""Generated protobuf code (do not edit; regenerate with `make protos`)."""

"""Dynamic MIG (`flags.migStrategy: dynamic`): placements advertised as devices, carved on Allocate.

plan: what a node advertises; geometry: which placements are held and which they block; checkpoint:
the holdings that survive a restart; runtime: claim, free and resume against a MigControl. No gRPC here.
"""

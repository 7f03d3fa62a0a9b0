"""Reproduce the FGD paper (USENIX ATC'23) on the Alibaba openb trace: loader, protocol, policies, metrics."""

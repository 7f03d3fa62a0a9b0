"""The narrated walkthrough: the plugin and the mock kubelet over real gRPC in a temp dir."""

from gpuslice.demo.render import render_text
from gpuslice.demo.walkthrough import SCENARIOS, DemoReport, ModeReport, Proof, run_demo

__all__ = ["SCENARIOS", "DemoReport", "ModeReport", "Proof", "render_text", "run_demo"]

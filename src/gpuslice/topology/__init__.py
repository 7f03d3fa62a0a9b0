"""GPU topology: pair links (NVLink, NVSwitch, PCIe levels), presets and pair scoring."""

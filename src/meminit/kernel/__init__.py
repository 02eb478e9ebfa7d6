"""The kernel series' source trees, configs, builds, checks, packages and mail; what the kernel logs about memmap init."""

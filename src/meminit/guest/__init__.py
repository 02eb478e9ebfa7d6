"""Booting built kernels in QEMU (virtme-ng), and what runs in the guests: KTAP, the mm selftests, check-configs' KUnit targets, the test command."""

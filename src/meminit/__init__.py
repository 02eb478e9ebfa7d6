"""meminit: build, boot, test and measure the meminit Linux 6.12 series."""

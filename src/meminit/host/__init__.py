"""Real devices on this machine: pmem namespaces, dax devices, test_hmm (measure)."""

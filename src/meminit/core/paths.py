"""Where things live in a checkout. Everything generated stays under work/ or results/."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PATCHES = REPO / "patches"
CONFIG_DIR = REPO / "config"
BENCH_DIR = REPO / "bench"
WORK = REPO / "work"
BUILD_ROOT = WORK / "build"
CACHE = WORK / "cache"
RESULTS = REPO / "results"
CCACHE_DIR = Path.home() / ".cache" / "meminit-ccache"

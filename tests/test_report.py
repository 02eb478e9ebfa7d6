import math

from meminit import scenarios
from meminit.core import results, stats
from meminit.scenarios import memmap

RESULT = {
    "kind": "memmap", "accel": "tcg", "guest_cpus": 2, "guest_memory": "5G",
    "source_package": "linux-source-6.12", "source_version": "6.12.117-1~deb12u1", "series_commit": "abc",
    "scenarios": [{"name": "fsdax-mapdev", "groups": [
        {"kernel": "series", "variant": "slow", "pages": 100, "first_ms": 50.0, "steady_ms": [10.0, 12.0]},
        {"kernel": "series", "variant": "template", "pages": 100, "first_ms": None, "steady_ms": [5.0, 6.0]},
        {"kernel": "base", "variant": "default", "pages": 100, "first_ms": 40.0, "steady_ms": [8.0, 12.0]},
    ]}],
}


def test_stats():
    st = stats.Stats.of([1.0, 2.0, 3.0])
    assert (st.n, st.mean, st.stdev, st.minimum, st.maximum) == (3, 2.0, 1.0, 1.0, 3.0)


def test_memmap_table_has_ratios_to_slow_and_base_and_tcg_label():
    text = scenarios.render(RESULT)
    template_row = next(line for line in text.splitlines() if " template " in line)
    assert "5.50 ± 0.71" in template_row
    assert template_row.split()[-2:] == ["0.50", "0.55"]
    assert results.TCG_LABEL in text


def test_plot_shows_time_per_rebind_and_speedups_higher_is_better(tmp_path, drawn_figures):
    png = memmap.plot_memmap(RESULT["scenarios"], RESULT, tmp_path / "plot.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    (fig,) = drawn_figures
    per_rebind, speedup = fig.axes[:2]
    assert [line.get_ydata().tolist() for line in per_rebind.get_lines()] == [[10.0, 12.0], [5.0, 6.0], [8.0, 12.0]]
    assert "higher is better" in speedup.get_ylabel()
    bars = {c.get_label(): [round(b.get_height(), 3) for b in c] for c in speedup.containers}
    # slow 11 ms, template 5.5, base 10: template is 2x over slow and 1.818x over base
    assert bars["over slow"][:2] == [1.0, 2.0] and math.isnan(bars["over slow"][2])  # base has no slow
    assert bars["over base"] == [0.909, 1.818, 1.0]


def test_variant_label_names_what_auto_resolved_to():
    assert memmap.variant_label({"variant": "template", "modes_used": ["template"]}) == "template"
    assert memmap.variant_label({"variant": "auto", "modes_used": ["streaming"]}) == "auto (streaming)"
    assert memmap.variant_label({"variant": "default"}) == "default"

from meminit import report

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
    st = report.Stats.of([1.0, 2.0, 3.0])
    assert (st.n, st.mean, st.stdev, st.minimum, st.maximum) == (3, 2.0, 1.0, 1.0, 3.0)


def test_memmap_table_has_ratios_to_slow_and_base_and_tcg_label():
    text = report.render(RESULT)
    template_row = next(line for line in text.splitlines() if " template " in line)
    assert "5.50 ± 0.71" in template_row
    assert template_row.split()[-2:] == ["0.50", "0.55"]
    assert report.TCG_LABEL in text


def test_plot_is_written(tmp_path):
    png = report.plot_memmap(RESULT, tmp_path / "plot.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_variant_label_names_what_auto_resolved_to():
    assert report.variant_label({"variant": "template", "modes_used": ["template"]}) == "template"
    assert report.variant_label({"variant": "auto", "modes_used": ["streaming"]}) == "auto (streaming)"
    assert report.variant_label({"variant": "default"}) == "default"

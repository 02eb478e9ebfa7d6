"""The core's KUnit hooks: found in its patches, caught in an object's nm output."""


import pytest

from meminit.core import kernels
from meminit.kernel import kunit_hooks, parts

PATCH = """\
diff --git a/mm/x.c b/mm/x.c
+++ b/mm/x.c
@@ -1,3 +1,20 @@
+EXPORT_SYMBOL_IF_KUNIT(always_there);
+#if IS_ENABLED(CONFIG_ZONE_DEVICE_MEMMAP_KUNIT_TEST)
+/**
+ * entry_one() - for the suite
+ */
+enum x entry_one(int a,
+		 int b)
+{
+#ifdef CONFIG_Y
+	return inner(a);
+#endif
+}
+EXPORT_SYMBOL_IF_KUNIT(entry_one);
+
+enum x
+entry_two(void)
+{
+}
+#endif
+static int not_an_entry(void)
+{
+}
diff --git a/Documentation/x.rst b/Documentation/x.rst
+EXPORT_SYMBOL_IF_KUNIT(in_prose);
"""


def test_the_hooks_are_the_exports_and_the_functions_of_the_guarded_blocks(tmp_path):
    patch = tmp_path / "0001.patch"
    patch.write_text(PATCH)
    hooks = kunit_hooks.core_hooks([patch])
    assert hooks.exported == ("always_there", "entry_one")
    assert hooks.entry_points == ("entry_one", "entry_two")


HOOKS = kunit_hooks.Hooks(exported=("names", "entry", "mm_internal"), entry_points=("entry",))


def test_an_object_without_the_hooks_passes_and_each_kind_of_hook_is_named():
    clean = "0000000000000000 T memmap_init_zone_device\n                 U memcpy\n0000000000000010 R names\n"
    assert kunit_hooks.problems({"mm/mm_init.o": clean}, HOOKS) == []
    leaked = clean + ("0000000000000040 r __export_symbol_mm_internal\n"
                      "0000000000000050 r __ksymtab_names\n0000000000000a53 T entry\n")
    assert kunit_hooks.problems({"mm/page_alloc.o": leaked}, HOOKS) == [
        "mm/page_alloc.o exports mm_internal to the KUnit suite, which is not built",
        "mm/page_alloc.o exports names to the KUnit suite, which is not built",
        "mm/page_alloc.o defines entry, an entry point of the KUnit suite, which is not built"]
    # a caller of an entry point (undefined there) is not a definition
    assert kunit_hooks.problems({"mm/x.o": "                 U entry\n"}, HOOKS) == []


@pytest.mark.parametrize("linux", list(kernels.KERNELS.values()), ids=lambda k: k.version)
def test_the_cores_hooks_are_its_kunit_entry_points_and_the_mm_internals_it_exports(linux):
    hooks = kunit_hooks.core_hooks(parts.read_series(linux.patches / parts.CORE))
    assert set(hooks.entry_points) == {"memmap_init_zone_device_mode", "memmap_init_zone_device_rule"}
    assert set(hooks.entry_points) < set(hooks.exported)
    assert "memmap_init_mode_names" in hooks.exported and len(hooks.exported) == 5

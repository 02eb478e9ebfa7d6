"""The count of kernel code lines a part adds (issue 66: the 7.3 core at most 400)."""

from __future__ import annotations

from meminit.core import kernels
from meminit.kernel import parts, series_size

FIXTURE = """Subject: [PATCH] a change

A message line that is not code.
---
diff --git a/mm/x.c b/mm/x.c
--- a/mm/x.c
+++ b/mm/x.c
@@ -1,3 +1,12 @@
+/*
+ * a block comment,
+ * three lines
+ */
+static int x; /* code with a comment */
+
+// a line comment
+int y = 1;	/* starts a comment
+ still the comment */
-int old;
-/* an old comment */
diff --git a/mm/Kconfig b/mm/Kconfig
--- a/mm/Kconfig
+++ b/mm/Kconfig
@@ -1,1 +1,14 @@
+config FAST_THING
+	bool "fast thing"
+	depends on ZONE_DEVICE
+	help
+	  Help text is not code.
+
+	  Neither is its second paragraph.
+
+config FAST_THING_KUNIT_TEST
+	tristate "its test" if !KUNIT_ALL_TESTS
+	depends on KUNIT
+
+# a comment
+config AFTER
diff --git a/mm/Makefile b/mm/Makefile
--- a/mm/Makefile
+++ b/mm/Makefile
@@ -1,1 +1,3 @@
+obj-$(CONFIG_FAST_THING) += fast.o
+obj-$(CONFIG_FAST_THING_KUNIT_TEST) += tests/fast_kunit.o
diff --git a/mm/tests/fast_kunit.c b/mm/tests/fast_kunit.c
--- /dev/null
+++ b/mm/tests/fast_kunit.c
@@ -0,0 +1,1 @@
+static int test_code_is_not_counted;
diff --git a/MAINTAINERS b/MAINTAINERS
--- a/MAINTAINERS
+++ b/MAINTAINERS
@@ -1,1 +1,2 @@
+F:	mm/x.c
"""


def test_code_lines_leave_out_comments_help_tests_and_maintainers():
    size = series_size.patch_size("fixture", FIXTURE)
    # x.c: `static int x;` and `int y = 1;`; Kconfig: config/bool/depends of FAST_THING and
    # `config AFTER`; Makefile: the fast.o line
    assert (size.added, size.removed) == (2 + 4 + 1, 1)


def test_the_73_core_keeps_its_budget():
    core = parts.read_series(kernels.get("7.3").patches / parts.CORE)
    sizes = series_size.part_size(core)
    total = sum(s.added for s in sizes)
    assert 0 < total <= series_size.CORE_LIMIT, series_size.report("core", sizes, series_size.CORE_LIMIT)

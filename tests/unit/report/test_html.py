"""The HTML report page: values a reader can take in, tables folded when long."""

from __future__ import annotations

from cotenant.report.html import HtmlTable, render_report, value_html


def test_values_are_never_python_reprs() -> None:
    assert value_html({"covers under 50% of the grid": 37}) == (
        '<ul class="kv"><li>covers under 50% of the grid: 37</li></ul>')
    assert value_html(True) == "yes"
    assert value_html(1428342) == "1,428,342"
    assert value_html(0.0028) == "0.0028"
    assert value_html([1, 0.99]) == "1, 0.99"
    assert value_html({}) == "none"
    assert value_html(None) == "n/a"
    assert value_html("<b>") == "&lt;b&gt;"


def test_a_folded_table_says_how_many_rows_it_holds() -> None:
    page = render_report("t", {"seed": 42}, [
        HtmlTable(["policy", "x"], [["a", "1"], ["b", "2"]], title="Every setting",
                  folded=True),
    ])
    assert "<details><summary>Every setting (2 rows)</summary>" in page
    assert "{" not in page.split("<style>")[0] + page.split("</style>")[1]


def test_text_columns_are_left_aligned_figures_right() -> None:
    page = render_report("t", {}, [HtmlTable(["policy", "GPU util %"], [["fgd", "95.27"]])])
    assert '<td class="t">fgd</td><td>95.27</td>' in page

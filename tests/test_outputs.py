"""What a page's blocks print is shown under them on the site (literate/site/outputs.py)."""

from __future__ import annotations

import pytest

from literate.site.outputs import MAX_LINES, python_blocks, run_page, with_outputs

PAGE = """# A page

```python
x = 6 * 7
print(x)
```

Some prose.

```python
y = x + 1  # prints nothing
```

!!! note "Indented"
    ```python
    print("inside", y)
    ```

<!-- skip: next if(True, reason="shown, not run") -->
```python
raise SystemExit
```
"""


def test_run_page_runs_the_blocks_in_one_namespace_and_skips_what_pytest_skips(
    tmp_path,
):
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    assert run_page(str(page)) == ["42\n", "", "inside 43\n"]
    assert len(python_blocks(PAGE)) == 3


def test_a_box_follows_each_block_that_printed_at_its_indentation():
    out = with_outputs(PAGE, ["42\n", "", "inside 43\n"])
    assert out.count('{ .output title="Output" }') == 2
    first = out.index("print(x)\n```") + len("print(x)\n```")
    assert out[first:].startswith('\n\n```text { .output title="Output" }\n42\n```')
    assert '\n    ```text { .output title="Output" }\n    inside 43\n    ```' in out
    assert "y = x + 1  # prints nothing\n```\n\n!!! note" in out  # no box for silence


def test_backticks_in_an_output_get_a_longer_fence_and_long_outputs_are_cut():
    out = with_outputs("```python\nprint('```')\n```\n", ["```\n"])
    assert '````text { .output title="Output" }\n```\n````' in out
    long = with_outputs(
        "```python\npass\n```\n", ["".join(f"{i}\n" for i in range(MAX_LINES + 5))]
    )
    assert (
        f"{MAX_LINES - 1}\n... (5 more lines)" in long
        and f"\n{MAX_LINES}\n" not in long
    )


def test_outputs_that_do_not_match_the_blocks_are_an_error():
    with pytest.raises(ValueError, match=r"^3 Python blocks on the page, 2 outputs$"):
        with_outputs(PAGE, ["42\n", ""])


def test_a_block_that_raises_fails_naming_the_page_line(tmp_path):
    page = tmp_path / "bad.md"
    page.write_text(
        "```python\nx = 1\n```\n\n```python\n1 / 0\n```\n", encoding="utf-8"
    )
    with pytest.raises(
        RuntimeError, match=r"bad\.md:5: the block raised ZeroDivisionError"
    ):
        run_page(str(page))


def test_a_block_marked_as_markdown_puts_what_it_prints_on_the_page_unboxed():
    page = (
        "Before.\n\n<!-- output: markdown -->\n```python\nprint(table)\n```\n\n"
        "```python\nprint(table)\n```\n"
    )
    out = with_outputs(page, ["| a | b |\n|---|---|\n| 1 | 2 |\n", "| a |\n"])
    assert "print(table)\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python" in out
    assert out.count('{ .output title="Output" }') == 1  # the unmarked block: a box

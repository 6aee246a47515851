"""The reading line (`literate.site.reading`): what it counts, and the budgets it holds.

The measure is read on small pages whose counts can be worked out by hand (a fold hides
its body, an include counts the lines it pulls, a claim's visible proof is proof, a
figure marks the minutes read before it); the budgets are then held on every page of
the nav: a chapter <= 45 minutes with every fold closed, the site <= 8 hours, proof
code <= 5% of a chapter's visible lines, no visible code block over 40 lines; and every
chapter says how long it takes where the measure prints it.
"""

from __future__ import annotations

import re

import pytest

from literate.site.docblocks import ROOT
from literate.site.reading import (
    BUDGET,
    READING_TIME,
    measure,
    read_site,
    reading_time,
    reading_times,
)

PAGE = """---
chapter: 3
---

# 3. A page

Four words of prose.

```python
a = 1
b = 2
```

??? note "Folded"
    Nine words here are folded and never read on the line.

    ```python
    hidden = 1
    ```

<!-- claim: demo.one -->
One claim sentence.

```python
assert a == 1
```

![](figure-light.svg#only-light)
![](figure-dark.svg#only-dark)

Back to prose.
"""


def test_the_measure_counts_what_a_reader_sees_with_folds_closed():
    r = measure(PAGE, page="demo.md")
    assert (r.chapter, r.title) == (3, "3. A page")
    assert r.words == 3 + 4 + 3 + 3  # heading, prose, the claim's sentence, the end
    assert r.code == 3  # two lines, then the proof's one; the folded block not
    assert r.proof == 1 and r.claims == 1
    assert r.longest == 2
    assert r.folded == 7  # the fold's line and its body, blank lines in it too
    assert r.figures == 1  # the dark twin is the same picture
    assert r.minutes == pytest.approx(13 / 200 + 3 / 8)
    assert r.first == pytest.approx(10 / 200 + 3 / 8)  # read before the picture
    assert r.gap == pytest.approx(r.first)  # the longest stretch without a picture
    assert r.proof_share == pytest.approx(1 / r.visible)


def test_a_fold_ends_where_the_text_comes_back_to_its_indent():
    page = '??? proof "Proof"\n    ```python\n    x = 1\n    ```\nSeen again.\n'
    r = measure(page)
    assert (r.code, r.words, r.folded) == (0, 2, 4)
    opened = measure(page.replace("???", "???+"))  # `???+` starts open: visible
    assert opened.code == 1


def test_blank_lines_in_a_visible_block_count_as_code():
    page = "```python\nx = 1\n\ny = 2\n```\n"
    r = measure(page)
    assert (r.code, r.longest) == (3, 3)  # as the shared checker counts them


def test_a_claims_paragraph_is_read_and_the_block_after_it_is_its_proof():
    page = "<!-- claim: x -->\nSaid here,\nand here.\n\n```python\nassert 1\n```\n"
    r = measure(page)
    assert (r.claims, r.words, r.proof) == (1, 4, 1)


def test_prose_after_a_claim_ends_its_proof():
    page = "<!-- claim: x -->\nSaid.\n\nProse.\n\n```python\nx = 1\n```\n"
    assert measure(page).proof == 0
    assert measure(page.replace("Prose.\n\n", "")).proof == 1


def test_the_time_a_chapter_prints_and_the_table_of_chapters():
    r = measure(PAGE, page="attention/demo.md")
    assert reading_time(r) == "About 5 minutes."  # rounded to 5, at least 5
    before = measure(PAGE.replace("chapter: 3", "chapter: 2"), page="intro.md")
    r = measure(PAGE.replace("chapter: 3", "chapter: 3\nneeds: [2]"), page="a/demo.md")
    assert r.needs == (2,)
    table = reading_times([before, r], on_page="index.md")
    assert "| [3. A page](a/demo.md) | [2](intro.md) | 0 |" in table
    assert "| [3. A page](intro.md) | - | 0 |" in table  # needs nothing


@pytest.fixture(scope="module")
def site():
    return read_site()


def chapters(site):
    return [r for r in site if r.chapter is not None]


def test_every_chapter_reads_within_its_budget(site):
    over = [
        f"{r.page}: {r.minutes:.1f} min"
        for r in chapters(site)
        if r.minutes > BUDGET["chapter_minutes"]
    ]
    assert not over, over


def test_the_whole_site_reads_within_its_budget(site):
    hours = sum(r.minutes for r in site) / 60
    assert hours <= BUDGET["site_hours"], f"{hours:.1f} h"


def test_proofs_sit_beside_the_line(site):
    over = [
        f"{r.page}: {100 * r.proof_share:.1f}% of {r.visible} lines"
        for r in chapters(site)
        if r.proof_share > BUDGET["proof_share"]
    ]
    assert not over, over


def test_no_visible_code_block_is_longer_than_a_screen(site):
    over = [
        f"{r.page}: {r.longest} lines"
        for r in site
        if r.longest > BUDGET["block_lines"]
    ]
    assert not over, over


def test_every_chapter_prints_its_reading_time_from_the_measure(site):
    for r in chapters(site):
        text = (ROOT / "docs" / r.page).read_text(encoding="utf-8")
        assert text.count(READING_TIME) == 1, r.page
        typed = re.findall(r"About \d+ minutes", text)
        assert not typed, (r.page, typed)  # the measure prints it, nobody types it

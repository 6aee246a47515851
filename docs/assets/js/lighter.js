// Folded code, coloured when its fold first opens (literate/site/lighter.py).
//
// A code block inside a closed <details> (a proof, a note) is shipped as plain text, its
// colours as runs in the code's `data-runs`: "<gap><class>.<length>" for each coloured
// span, the gap being the uncoloured text before it, both counted in UTF-16 code units
// (JavaScript's string lengths). When a fold opens (a click, Enter or Space on its
// summary, a link to an anchor inside it, the browser's find-in-page, printing), each such
// block inside it is cut into its spans, once: the same text, now coloured. Until then the
// page holds one text node per block instead of hundreds of spans.
(() => {
  const RUN = /(\d*)([a-z][a-z0-9]*)\.(\d+)/g;

  function colour(code) {
    const runs = code.getAttribute("data-runs");
    code.removeAttribute("data-runs");
    const text = code.textContent;
    const spans = document.createDocumentFragment();
    let at = 0;
    for (const [, gap, cls, length] of runs.matchAll(RUN)) {
      if (gap) spans.append(text.slice(at, (at += Number(gap))));
      const span = document.createElement("span");
      span.className = cls;
      span.textContent = text.slice(at, (at += Number(length)));
      spans.append(span);
    }
    if (at > text.length) return; // runs that do not fit the text: it stays plain
    if (at < text.length) spans.append(text.slice(at));
    code.replaceChildren(spans);
  }

  function colourOpen(root) {
    root.querySelectorAll("details[open] code[data-runs]").forEach(colour);
  }

  // `toggle` does not bubble: listened for while it goes down to the fold (capture), on
  // the document, which stays across Material's instant navigation.
  document.addEventListener(
    "toggle",
    (event) => {
      const fold = event.target;
      if (fold instanceof HTMLDetailsElement && fold.open) {
        fold.querySelectorAll("code[data-runs]").forEach(colour);
      }
    },
    true,
  );
  // A fold opened before this script ran (it loads last).
  colourOpen(document);
})();

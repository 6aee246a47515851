// What a keyboard or a screen reader needs and the page's markup cannot give, done again on
// every page load (Material's instant navigation included: `document$`, whose subscribers
// run after Material has built its own components; without Material, DOMContentLoaded).
//
// 1. A box that scrolls sideways (a table wider than the column, a long formula, a
//    notebook's code cell) is put in the tab order while it scrolls, so that a keyboard
//    reaches it and its arrow keys scroll it, as Material does for code blocks. A box
//    holding something focusable already is left alone: the keyboard scrolls it from
//    there. A box put in the tab order is named ("table", "equation", "code") when it has
//    no name, as a group (not a landmark: the page's list of landmarks stays short). Each
//    box is watched for size changes (a phone turned, a block opened) and for fonts
//    arriving (KaTeX's font widens a formula without resizing its box).
// 2. A code annotation's marker, a link whose number Material draws as CSS content (which
//    is no name to every screen reader), is named "Annotation <number>".
(() => {
  const BOXES = [
    [".md-typeset__scrollwrap", "table"],
    [".md-typeset div.arithmatex", "equation"],
    [".highlight-ipynb", "code"],
  ];
  // Set on a box to the attributes this script gave it (and takes back when it no longer
  // scrolls).
  const MARK = "data-scroll-focus";
  const NAMES = new WeakMap(); // box -> the name it is given
  const FOCUSABLE =
    "a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex='-1'])";

  const scrolls = (box) => box.scrollWidth > box.clientWidth + 1;

  function update(box) {
    const ours = box.hasAttribute(MARK);
    if (!ours && (box.hasAttribute("tabindex") || box.querySelector(FOCUSABLE))) return;
    if (scrolls(box) && !ours) {
      const given = ["tabindex"];
      box.setAttribute("tabindex", "0");
      if (!box.hasAttribute("role")) {
        box.setAttribute("role", "group");
        given.push("role");
      }
      if (!box.hasAttribute("aria-label") && !box.hasAttribute("aria-labelledby")) {
        box.setAttribute("aria-label", NAMES.get(box));
        given.push("aria-label");
      }
      box.setAttribute(MARK, given.join(" "));
    } else if (!scrolls(box) && ours) {
      for (const name of box.getAttribute(MARK).split(" ")) box.removeAttribute(name);
      box.removeAttribute(MARK);
    }
  }

  let observer = null;
  let boxes = [];

  function watchBoxes() {
    if (observer) observer.disconnect();
    observer = new ResizeObserver((entries) => entries.forEach((e) => update(e.target)));
    boxes = [];
    for (const [selector, name] of BOXES) {
      for (const box of document.querySelectorAll(selector)) {
        NAMES.set(box, name);
        update(box);
        observer.observe(box);
        boxes.push(box);
      }
    }
  }

  document.fonts.addEventListener("loadingdone", () => boxes.forEach(update));

  function nameAnnotations() {
    for (const marker of document.querySelectorAll("a.md-annotation__index")) {
      const id = marker.querySelector("[data-md-annotation-id]");
      if (id && !marker.hasAttribute("aria-label")) {
        marker.setAttribute("aria-label", `Annotation ${id.dataset.mdAnnotationId}`);
      }
    }
  }

  function onLoad() {
    watchBoxes();
    nameAnnotations();
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(onLoad);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", onLoad);
  } else {
    onLoad();
  }
})();

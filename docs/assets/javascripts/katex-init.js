// Typeset the math that pymdownx.arithmatex (generic mode) leaves in the page, and the
// $...$ of notebook pages, with the KaTeX served by this site. `document$` fires on
// every page load, including Material's instant navigation.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "$", right: "$", display: false },
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
    errorCallback: (message, error) => console.error("KaTeX:", message, error),
  });
});

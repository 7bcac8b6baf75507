/* Typeset `.arithmatex` elements with the locally served KaTeX. `trust: false` refuses \href,
   \url, \includegraphics and \html*; `maxExpand` and `maxSize` stop macro and size bombs. */
(function () {
  "use strict";
  if (!window.katex) { return; }
  var options = {
    throwOnError: false,
    trust: false,
    strict: "ignore",
    maxExpand: 1000,
    maxSize: 50,
    output: "htmlAndMathml"
  };
  var elements = document.querySelectorAll("#kb-body .arithmatex");
  Array.prototype.forEach.call(elements, function (el) {
    var tex = el.textContent.trim();
    var display = el.tagName === "DIV";
    if (tex.slice(0, 2) === "\\(" && tex.slice(-2) === "\\)") {
      tex = tex.slice(2, -2);
    } else if (tex.slice(0, 2) === "\\[" && tex.slice(-2) === "\\]") {
      tex = tex.slice(2, -2);
      display = true;
    }
    try {
      window.katex.render(tex, el, Object.assign({ displayMode: display }, options));
      el.classList.add("math-rendered");
    } catch (err) {
      el.textContent = tex;
      el.classList.add("math-error");
    }
  });
})();

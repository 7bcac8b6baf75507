/* Draw ```mermaid blocks with the locally served mermaid. `strict` keeps labels as sanitized
   text and disables click callbacks; the `secure` keys cannot be changed by %%{init}%% directives. */
(function () {
  "use strict";
  if (!window.mermaid) { return; }
  window.mermaid.initialize({
    startOnLoad: true,
    securityLevel: "strict",
    maxTextSize: 50000,
    maxEdges: 2000,
    secure: ["secure", "securityLevel", "startOnLoad", "maxTextSize", "maxEdges", "suppressErrorRendering"],
    theme: "default"
  });
})();

/* Reader page behaviour: copy buttons on code blocks, the links panel, prefixed heading anchors.
   Served as a static file; the pages' CSP forbids inline scripts. */
(function () {
  "use strict";

  var body = document.getElementById("kb-body");

  // --- copy control on every code block -------------------------------------------------------
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "copy-buffer";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy failed")); }
    });
  }

  function addCopyButtons(root) {
    var blocks = root.querySelectorAll("div.highlight");
    Array.prototype.forEach.call(blocks, function (block) {
      var code = block.querySelector("pre");
      if (!code || block.querySelector(".copy-button")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-button";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy this code");
      button.addEventListener("click", function () {
        var text = code.textContent.replace(/\n$/, "");
        copyText(text).then(function () {
          button.textContent = "Copied";
          button.dataset.state = "copied";
        }, function () {
          button.textContent = "Copy failed";
          button.dataset.state = "failed";
        });
        window.setTimeout(function () { button.textContent = "Copy"; }, 2000);
      });
      block.insertBefore(button, block.firstChild);
    });
  }

  // --- links panel, fed by the graph API (hidden when the API is not there) ---------------------
  function encodePath(path) {
    return String(path).split("/").map(encodeURIComponent).join("/");
  }

  function describe(item) {
    if (item === null || item === undefined) { return null; }
    if (typeof item === "string") { return { label: item, href: null }; }
    var doc = item.document || item.node || item.target_document || item.source_document || item;
    var namespace = doc.namespace;
    if (namespace && typeof namespace === "object") { namespace = namespace.slug; }
    var id = doc.document_id || doc.id;
    var href = null;
    if (namespace && doc.path) {
      href = "/ui/kb/" + encodeURIComponent(namespace) + "/" + encodePath(doc.path);
    } else if (id && /^[0-9a-f-]{36}$/i.test(String(id))) {
      href = "/ui/doc/" + String(id).toLowerCase();
    }
    var label = doc.title || doc.path || item.raw || item.href || item.target || item.uri || id || "?";
    var type = item.edge_type && item.edge_type !== "references" ? item.edge_type : "";
    return { label: String(label), href: href, type: type };
  }

  function fill(listId, items) {
    var list = document.getElementById(listId);
    if (!list) { return 0; }
    (items || []).forEach(function (item) {
      var info = describe(item);
      if (!info) { return; }
      var li = document.createElement("li");
      var node;
      if (info.href) {
        node = document.createElement("a");
        node.href = info.href;
      } else {
        node = document.createElement("span");
      }
      node.textContent = info.label;
      li.appendChild(node);
      if (info.type) {
        var chip = document.createElement("span");
        chip.className = "chip";
        chip.textContent = info.type;
        li.appendChild(document.createTextNode(" "));
        li.appendChild(chip);
      }
      list.appendChild(li);
    });
    if (!list.children.length) {
      var none = document.createElement("li");
      none.className = "muted";
      none.textContent = "None";
      list.appendChild(none);
    }
    return (items || []).length;
  }

  function loadLinks() {
    var panel = document.getElementById("kb-links");
    if (!panel || !window.fetch) { return; }
    fetch(panel.dataset.endpoint, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        fill("kb-links-outgoing", data.outgoing);
        fill("kb-links-backlinks", data.backlinks);
        if (data.unresolved && data.unresolved.length) {
          fill("kb-links-unresolved", data.unresolved);
          document.getElementById("kb-links-unresolved-box").hidden = false;
        }
        panel.hidden = false;
        panel.dataset.loaded = "true";
      })
      .catch(function () { /* no graph yet: show nothing */ });
  }

  // --- heading ids carry a `user-content-` prefix; plain #fragments still land on them --------
  function followHash() {
    var hash = decodeURIComponent(window.location.hash.slice(1));
    if (!hash || document.getElementById(hash)) { return; }
    var target = document.getElementById("user-content-" + hash);
    if (target) { target.scrollIntoView(); }
  }

  if (body) { addCopyButtons(body); }
  loadLinks();
  window.addEventListener("hashchange", followHash);
  followHash();
})();

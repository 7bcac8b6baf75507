/* Namespace graph: fetch {nodes, edges} from the graph API and draw them as SVG with a small
   force layout. Nodes are links to the reader pages; drag a node to move it. No libraries. */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var svg = document.getElementById("kb-graph");
  var statusLine = document.getElementById("kb-graph-status");
  if (!svg) { return; }

  var COLORS = ["#4063d8", "#d8406a", "#2f9e6e", "#c7851c", "#7b4bd6", "#1c93b4", "#777777"];

  function setStatus(text) { if (statusLine) { statusLine.textContent = text; } }

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function encodePath(path) { return String(path).split("/").map(encodeURIComponent).join("/"); }

  // Deterministic pseudo-random numbers, so the same graph lays out the same way every time.
  function random(seed) {
    var state = seed >>> 0 || 1;
    return function () {
      state ^= state << 13; state ^= state >>> 17; state ^= state << 5;
      return ((state >>> 0) % 100000) / 100000;
    };
  }

  function layout(nodes, edges, width, height) {
    var n = nodes.length;
    var rand = random(n * 7919 + edges.length);
    var radius = Math.min(width, height) * 0.35;
    nodes.forEach(function (node, i) {
      var angle = (2 * Math.PI * i) / Math.max(n, 1);
      node.x = width / 2 + radius * Math.cos(angle) + (rand() - 0.5) * 10;
      node.y = height / 2 + radius * Math.sin(angle) + (rand() - 0.5) * 10;
    });
    var area = width * height;
    var k = Math.sqrt(area / Math.max(n, 1)) * 0.6;
    var iterations = n > 400 ? 120 : 300;
    var temperature = Math.min(width, height) / 8;
    for (var step = 0; step < iterations; step++) {
      var i, j, dx, dy, d2, d, force;
      for (i = 0; i < n; i++) { nodes[i].fx = 0; nodes[i].fy = 0; }
      for (i = 0; i < n; i++) {
        for (j = i + 1; j < n; j++) {
          dx = nodes[i].x - nodes[j].x; dy = nodes[i].y - nodes[j].y;
          d2 = dx * dx + dy * dy;
          if (d2 < 0.01) { dx = rand() - 0.5; dy = rand() - 0.5; d2 = 0.01; }
          force = (k * k) / d2;
          nodes[i].fx += dx * force; nodes[i].fy += dy * force;
          nodes[j].fx -= dx * force; nodes[j].fy -= dy * force;
        }
      }
      edges.forEach(function (edge) {
        var a = edge.sourceNode, b = edge.targetNode;
        if (a === b) { return; }
        var ex = a.x - b.x, ey = a.y - b.y;
        var dist = Math.sqrt(ex * ex + ey * ey) || 0.01;
        var pull = (dist * dist) / k / dist;
        a.fx -= ex * pull; a.fy -= ey * pull;
        b.fx += ex * pull; b.fy += ey * pull;
      });
      for (i = 0; i < n; i++) {
        var node = nodes[i];
        node.fx += (width / 2 - node.x) * 0.02 * k / 10;
        node.fy += (height / 2 - node.y) * 0.02 * k / 10;
        d = Math.sqrt(node.fx * node.fx + node.fy * node.fy) || 1;
        var move = Math.min(d, temperature);
        node.x += (node.fx / d) * move;
        node.y += (node.fy / d) * move;
      }
      temperature *= 0.985;
    }
  }

  function draw(data) {
    var nodes = (data.nodes || []).map(function (raw) {
      var namespace = raw.namespace && typeof raw.namespace === "object" ? raw.namespace.slug : raw.namespace;
      return {
        key: String(raw.document_id || raw.id),
        ids: [raw.document_id, raw.id, raw.node_id, raw.uri].filter(Boolean).map(String),
        title: String(raw.title || raw.path || "Untitled"),
        path: raw.path ? String(raw.path) : "",
        namespace: namespace ? String(namespace) : "",
        documentId: raw.document_id ? String(raw.document_id) : ""
      };
    });
    var byId = {};
    nodes.forEach(function (node) { node.ids.forEach(function (id) { byId[id] = node; }); });
    var edges = [];
    (data.edges || []).forEach(function (raw) {
      var source = byId[String(raw.source || raw.source_id || raw.source_document_id)];
      var target = byId[String(raw.target || raw.target_id || raw.target_document_id)];
      if (source && target) {
        edges.push({ sourceNode: source, targetNode: target, type: String(raw.edge_type || "references") });
      }
    });
    if (!nodes.length) {
      setStatus("This namespace has no documents to draw.");
      svg.dataset.state = "empty";
      return;
    }

    var width = Math.max(svg.clientWidth || 960, 480);
    var height = Math.max(svg.clientHeight || 640, 360);
    layout(nodes, edges, width, height);

    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var types = [];
    edges.forEach(function (edge) { if (types.indexOf(edge.type) < 0) { types.push(edge.type); } });
    var defs = el("defs", {}, svg);
    types.forEach(function (type, index) {
      var marker = el("marker", {
        id: "kb-arrow-" + index, viewBox: "0 0 10 10", refX: "20", refY: "5",
        markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse"
      }, defs);
      el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: COLORS[index % COLORS.length] }, marker);
    });

    var edgeLayer = el("g", { "class": "graph-edges" }, svg);
    var nodeLayer = el("g", { "class": "graph-nodes" }, svg);
    edges.forEach(function (edge) {
      var index = types.indexOf(edge.type);
      edge.line = el("line", {
        "class": "graph-edge", stroke: COLORS[index % COLORS.length], "stroke-width": "1.5",
        "marker-end": "url(#kb-arrow-" + index + ")"
      }, edgeLayer);
      var title = el("title", {}, edge.line);
      title.textContent = edge.sourceNode.title + " → " + edge.targetNode.title + " (" + edge.type + ")";
    });

    var reader = svg.dataset.readerBase || "/ui/kb/";
    nodes.forEach(function (node) {
      var href = node.namespace && node.path
        ? "/ui/kb/" + encodeURIComponent(node.namespace) + "/" + encodePath(node.path)
        : node.path ? reader + encodePath(node.path)
          : node.documentId ? "/ui/doc/" + encodeURIComponent(node.documentId) : "#";
      var link = el("a", { href: href, "class": "graph-node" }, nodeLayer);
      var degree = edges.filter(function (e) { return e.sourceNode === node || e.targetNode === node; }).length;
      node.circle = el("circle", { r: String(7 + Math.min(degree, 8)), "class": "graph-node-dot" }, link);
      node.label = el("text", { "class": "graph-node-label", dx: "12", dy: "4" }, link);
      node.label.textContent = node.title;
      var tip = el("title", {}, link);
      tip.textContent = node.title + (node.path ? " — " + node.path : "");
      node.link = link;
    });

    function place() {
      edges.forEach(function (edge) {
        edge.line.setAttribute("x1", edge.sourceNode.x.toFixed(1));
        edge.line.setAttribute("y1", edge.sourceNode.y.toFixed(1));
        edge.line.setAttribute("x2", edge.targetNode.x.toFixed(1));
        edge.line.setAttribute("y2", edge.targetNode.y.toFixed(1));
      });
      nodes.forEach(function (node) {
        node.circle.setAttribute("cx", node.x.toFixed(1));
        node.circle.setAttribute("cy", node.y.toFixed(1));
        node.label.setAttribute("x", node.x.toFixed(1));
        node.label.setAttribute("y", node.y.toFixed(1));
      });
    }

    function fit() {
      var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
      nodes.forEach(function (node) {
        minX = Math.min(minX, node.x); minY = Math.min(minY, node.y);
        maxX = Math.max(maxX, node.x + 12 + node.title.length * 7); maxY = Math.max(maxY, node.y);
      });
      var pad = 40;
      svg.setAttribute("viewBox", [minX - pad, minY - pad, (maxX - minX) + 2 * pad, (maxY - minY) + 2 * pad]
        .map(function (v) { return v.toFixed(1); }).join(" "));
    }

    // Dragging: move a node with the pointer; a drag does not follow the link.
    var dragging = null;
    function toGraph(event) {
      var point = svg.createSVGPoint();
      point.x = event.clientX; point.y = event.clientY;
      return point.matrixTransform(svg.getScreenCTM().inverse());
    }
    nodes.forEach(function (node) {
      node.link.addEventListener("pointerdown", function (event) {
        dragging = { node: node, start: toGraph(event), moved: false };
        node.link.setPointerCapture(event.pointerId);
      });
      node.link.addEventListener("pointermove", function (event) {
        if (!dragging || dragging.node !== node) { return; }
        var p = toGraph(event);
        if (Math.abs(p.x - dragging.start.x) + Math.abs(p.y - dragging.start.y) > 4) { dragging.moved = true; }
        if (dragging.moved) { node.x = p.x; node.y = p.y; place(); }
      });
      node.link.addEventListener("pointerup", function () {
        if (dragging && dragging.moved) { node.link.dataset.dragged = "true"; }
        dragging = null;
      });
      node.link.addEventListener("click", function (event) {
        if (node.link.dataset.dragged === "true") { event.preventDefault(); delete node.link.dataset.dragged; }
      });
    });

    place();
    fit();
    svg.dataset.state = "drawn";
    svg.dataset.nodes = String(nodes.length);
    svg.dataset.edges = String(edges.length);
    setStatus(nodes.length + " document" + (nodes.length === 1 ? "" : "s") + ", " +
      edges.length + " link" + (edges.length === 1 ? "" : "s") + ".");
  }

  fetch(svg.dataset.endpoint, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then(function (response) {
      if (response.status === 404) { throw new Error("missing"); }
      if (!response.ok) { throw new Error("failed"); }
      return response.json();
    })
    .then(draw)
    .catch(function (error) {
      svg.dataset.state = "unavailable";
      setStatus(error.message === "missing"
        ? "The link graph is not available for this namespace yet."
        : "The graph could not be loaded.");
    });
})();

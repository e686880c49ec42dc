// agentload report: the interactive figures (no library, no network: the file opens offline).
// Reads the JSON in #al-data; draws the token and job Pareto plots and the session swim lanes
// as SVG; a checkbox per run shows or hides it; hovering a point or a call shows its numbers.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"];
  var data = JSON.parse(document.getElementById("al-data").textContent);
  var tip = document.getElementById("al-tip");
  var shown = data.runs.map(function () { return true; });

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return String(v);
    if (v === 0) return "0";
    var a = Math.abs(v);
    return a >= 100 ? v.toLocaleString("en-US", {maximumFractionDigits: 0})
      : a >= 1 ? v.toFixed(2) : v.toPrecision(3);
  }

  function showTip(evt, rows) {
    tip.innerHTML = "";
    var table = document.createElement("table");
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      var k = document.createElement("th"); k.textContent = r[0];
      var v = document.createElement("td"); v.textContent = fmt(r[1]);
      tr.appendChild(k); tr.appendChild(v); table.appendChild(tr);
    });
    tip.appendChild(table);
    tip.hidden = false;
    tip.style.left = (evt.pageX + 12) + "px";
    tip.style.top = (evt.pageY + 12) + "px";
  }

  function hideTip() { tip.hidden = true; }

  function ticks(lo, hi, n) {
    var span = hi - lo || Math.abs(hi) || 1, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step) out.push(t);
    return out;
  }

  function frontier(pts) {  // the points no other beats on both axes, by x
    var best = [];
    pts.slice().sort(function (a, b) { return b.x - a.x || b.y - a.y; }).forEach(function (p) {
      if (!best.length || p.y > best[best.length - 1].y) best.push(p);
    });
    return best.sort(function (a, b) { return a.x - b.x; });
  }

  function scatter(id, xk, yk, xlabel, ylabel, title) {
    var box = document.getElementById(id);
    box.innerHTML = "";
    var W = 640, H = 380, L = 70, R = 20, T = 30, B = 50;
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"}, box);
    el("text", {x: W / 2, y: 18, "text-anchor": "middle", "font-weight": "bold"}, svg).textContent = title;
    var all = [];
    data.runs.forEach(function (run, i) {
      run.points.forEach(function (p) {
        if (p[xk] !== null && p[yk] !== null) all.push({run: i, x: p[xk], y: p[yk], p: p});
      });
    });
    if (!all.length) {
      el("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, svg).textContent = "no point has both figures";
      return;
    }
    var xs = all.map(function (a) { return a.x; }), ys = all.map(function (a) { return a.y; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min(0, Math.min.apply(null, ys)), y1 = Math.max.apply(null, ys);
    var pad = (x1 - x0) * 0.08 || Math.abs(x1) * 0.1 || 1;
    x0 -= pad; x1 += pad; y1 += (y1 - y0) * 0.08 || 1;
    function sx(v) { return L + (v - x0) / (x1 - x0) * (W - L - R); }
    function sy(v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); }
    el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#333"}, svg);
    el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#333"}, svg);
    ticks(x0, x1, 6).forEach(function (t) {
      el("line", {x1: sx(t), y1: H - B, x2: sx(t), y2: H - B + 4, stroke: "#333"}, svg);
      el("text", {x: sx(t), y: H - B + 16, "text-anchor": "middle", "font-size": 11}, svg).textContent = fmt(t);
    });
    ticks(y0, y1, 6).forEach(function (t) {
      el("line", {x1: L - 4, y1: sy(t), x2: L, y2: sy(t), stroke: "#333"}, svg);
      el("text", {x: L - 6, y: sy(t) + 4, "text-anchor": "end", "font-size": 11}, svg).textContent = fmt(t);
    });
    el("text", {x: (L + W - R) / 2, y: H - 12, "text-anchor": "middle", "font-size": 12}, svg).textContent = xlabel;
    el("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 12,
                transform: "rotate(-90 14 " + (T + H - B) / 2 + ")"}, svg).textContent = ylabel;
    data.runs.forEach(function (run, i) {
      if (!shown[i]) return;
      var mine = all.filter(function (a) { return a.run === i; });
      var color = COLORS[i % COLORS.length];
      var f = frontier(mine);
      if (f.length > 1) {
        el("polyline", {points: f.map(function (a) { return sx(a.x) + "," + sy(a.y); }).join(" "),
                        fill: "none", stroke: color, "stroke-dasharray": "5 4", class: "frontier"}, svg);
      }
      mine.forEach(function (a) {
        var c = el("circle", {cx: sx(a.x), cy: sy(a.y), r: 6, fill: color, "data-run": i,
                              "data-load": a.p.load, class: "point"}, svg);
        c.addEventListener("mouseenter", function (evt) {
          showTip(evt, [["run", run.name]].concat(a.p.tip));
        });
        c.addEventListener("mouseleave", hideTip);
        el("text", {x: sx(a.x) + 8, y: sy(a.y) - 8, "font-size": 10}, svg).textContent = a.p.load;
      });
    });
  }

  function lanes(id) {
    var box = document.getElementById(id);
    box.innerHTML = "";
    var ln = data.lanes;
    if (!ln || !ln.sessions.length) { box.textContent = "no session to show"; return; }
    var W = 900, L = 90, R = 20, T = 30, row = 22, H = T + ln.sessions.length * row + 30;
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"}, box);
    el("text", {x: W / 2, y: 18, "text-anchor": "middle", "font-weight": "bold"}, svg).textContent = ln.title;
    var t1 = 1, ttftMax = 1;
    ln.sessions.forEach(function (s) {
      s.calls.forEach(function (c) { t1 = Math.max(t1, c[1]); ttftMax = Math.max(ttftMax, c[2] || 0); });
    });
    function sx(v) { return L + v / t1 * (W - L - R); }
    function color(ttft) {  // green (fast) to red (the slowest first token shown)
      var f = Math.min(1, (ttft || 0) / ttftMax);
      return "hsl(" + Math.round(120 * (1 - f)) + ",70%,45%)";
    }
    ln.sessions.forEach(function (s, k) {
      var y = T + k * row;
      el("text", {x: L - 6, y: y + row / 2 + 4, "text-anchor": "end", "font-size": 11}, svg).textContent = s.name;
      el("line", {x1: L, y1: y + row - 1, x2: W - R, y2: y + row - 1, stroke: "#eee"}, svg);
      s.calls.forEach(function (c) {
        var sub = c[3] === 1, h = sub ? row / 2 - 3 : row - 4;
        var r = el("rect", {x: sx(c[0]), y: sub ? y + row / 2 : y + 1,
                            width: Math.max(1, sx(c[1]) - sx(c[0])), height: h,
                            fill: color(c[2]), class: sub ? "call sub" : "call"}, svg);
        r.addEventListener("mouseenter", function (evt) {
          showTip(evt, [["session", s.name], ["agent", c[4]], [sub ? "sub-agent" : "root", ""],
                        ["sent (ms)", c[0]], ["ended (ms)", c[1]], ["TTFT (ms)", c[2]]]);
        });
        r.addEventListener("mouseleave", hideTip);
      });
    });
    el("text", {x: L, y: H - 8, "font-size": 11}, svg).textContent =
      "0 to " + fmt(t1 / 1000) + " s · full height: the root agent's calls, lower half: " +
      "sub-agents' · colour: TTFT, green fast to red " + fmt(ttftMax) + " ms · gaps: tool waits";
  }

  function draw() {
    scatter("al-pareto", "x", "y", data.x_label, data.y_label, "Throughput vs interactivity");
    scatter("al-jobs", "jx", "jy", data.jx_label, data.jy_label, "Jobs: the system's vs each user's");
  }

  var toggles = document.getElementById("al-runs");
  data.runs.forEach(function (run, i) {
    var label = document.createElement("label");
    var box = document.createElement("input");
    box.type = "checkbox"; box.checked = true; box.setAttribute("data-run", i);
    box.addEventListener("change", function () { shown[i] = box.checked; draw(); });
    label.appendChild(box);
    label.appendChild(document.createTextNode(" " + run.name + " "));
    label.style.color = COLORS[i % COLORS.length];
    toggles.appendChild(label);
  });
  draw();
  lanes("al-lanes");
})();
